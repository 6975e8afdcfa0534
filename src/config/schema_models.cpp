// Schema of the `models` section (one entry per role: how it is initialised,
// its training and rollout layouts, head, tokenizer, optimizer state) and of
// `rewards` (verifiable answer checking, a reward-model role, or an external
// command). Names a role or reward refers to are checked later, in
// validate.cpp, once every section has been read.
#include <cmath>

#include "config/schema_sections.h"

namespace hpcrl::config::schema {

namespace {

Codec<InitConfig> init_codec() {
  using S = InitConfig;
  StructSpec<S> spec{"a role's initialisation", {
      only_if<S>(field<S>("preset", [](auto& s) -> auto& { return s.preset; }, text()),
                 [](const S& s) { return s.kind == InitKind::preset; }),
      only_if<S>(field<S>("path", [](auto& s) -> auto& { return s.path; }, text()),
                 [](const S& s) { return s.kind == InitKind::path; }),
      only_if<S>(field<S>("from", [](auto& s) -> auto& { return s.from; }, name_ref()),
                 [](const S& s) { return s.kind == InitKind::from; }),
  }};
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    std::vector<std::string> given;
    for (const char* k : {"preset", "path", "from"})
      if (n.find(k)) given.push_back(k);
    if (given.size() == 1) {
      s.kind = *parse_enum<InitKind>(given[0]);
    } else if (given.empty() && n.entries.empty()) {
      reading.error(n.pos, path, "says nothing about how to initialise the role",
                "give one of `preset: tiny`, `path: DIR` (HF model directory) or `from: ROLE`");
    } else if (given.size() > 1) {
      error_at_key(reading, n, path, given[1], "gives both '" + given[0] + "' and '" + given[1] + "'",
                   "keep exactly one of preset, path, from");
    }
  };
  return structure<S>(std::move(spec));
}

// [a, b] into two double members (betas).
template <class S, class G1, class G2>
Field<S> pair_field(std::string name, G1 get1, G2 get2, Codec<double> elem) {
  auto codec = list_of(elem, 2, 2);
  Field<S> f;
  f.name = std::move(name);
  f.type = codec.type;
  f.read = [=](S& s, const YNode& n, const std::string& p, Reading& reading) {
    std::vector<double> v;
    if (!codec.read(n, p, reading, v)) return false;
    get1(s) = v[0];
    get2(s) = v[1];
    return true;
  };
  f.write = [=](const S& s) { return codec.write({get1(s), get2(s)}); };
  return f;
}

Codec<OptimConfig> optim_codec() {
  using S = OptimConfig;
  return structure<S>({"optimizer settings", {
      pair_field<S>("betas", [](auto& s) -> auto& { return s.beta1; }, [](auto& s) -> auto& { return s.beta2; },
                    number(0, 1, Bound::kClosed, Bound::kOpen)),
      field<S>("eps", [](auto& s) -> auto& { return s.eps; }, number(0, 1, Bound::kOpen)),
      field<S>("zero", [](auto& s) -> auto& { return s.zero; }, integer(0, 3)),
      field<S>("bucket_mb", [](auto& s) -> auto& { return s.bucket_mb; }, number(0.001, 4096)),
  }});
}

// The projections an adapter may wrap: attention and dense-MLP linears (HF names).
const std::vector<std::string>& lora_target_names() {
  static const std::vector<std::string> names{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                              "down_proj"};
  return names;
}

Codec<LoraConfig> lora_codec() {
  using S = LoraConfig;
  StructSpec<S> spec{"LoRA adapters", {
      field<S>("rank", [](auto& s) -> auto& { return s.rank; }, integer(1, 65536), kRequired),
      field<S>("alpha", [](auto& s) -> auto& { return s.alpha; }, number(0, HUGE_VAL, Bound::kOpen)),
      field<S>("dropout", [](auto& s) -> auto& { return s.dropout; }, number(0, 1, Bound::kClosed, Bound::kOpen)),
      field<S>("targets", [](auto& s) -> auto& { return s.targets; }, list_of(text(), 1)),
      field<S>("save_merged", [](auto& s) -> auto& { return s.save_merged; }, boolean()),
  }};
  spec.scalar_key = "rank";  // `lora: 8` is the rank
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    const YNode* list = n.find("targets");
    for (size_t i = 0; i < s.targets.size(); ++i) {
      const SourcePos& pos = list && list->is_seq() ? list->items[i].pos : n.pos;
      const std::string item = join_path(path, "targets") + "[" + std::to_string(i) + "]";
      const auto& known = lora_target_names();
      if (std::find(known.begin(), known.end(), s.targets[i]) == known.end())
        unknown_word(reading, pos, item, s.targets[i], known, "LoRA target");
      for (size_t j = 0; j < i; ++j)
        if (s.targets[j] == s.targets[i]) reading.error(pos, item, "lists '" + s.targets[i] + "' twice", "remove it");
    }
  };
  return structure<S>(std::move(spec));
}

Codec<RolloutConfig> rollout_codec() {
  using S = RolloutConfig;
  return structure<S>({"a role's rollout engine", {
      field<S>("parallel", [](auto& s) -> auto& { return s.parallel; }, parallel_codec(false)),
      field<S>("max_batch", [](auto& s) -> auto& { return s.max_batch; }, integer(1)),
      field<S>("decode_step", [](auto& s) -> auto& { return s.decode_step; }, enumeration<DecodeStep>()),
  }});
}

Codec<ModelConfig> model_codec() {
  using S = ModelConfig;
  return structure<S>({"a model role", {
      field<S>("init", [](auto& s) -> auto& { return s.init; }, init_codec(), kRequired),
      field<S>("parallel", [](auto& s) -> auto& { return s.parallel; }, parallel_codec(true)),
      field<S>("rollout", [](auto& s) -> auto& { return s.rollout; }, rollout_codec()),
      field<S>("frozen", [](auto& s) -> auto& { return s.frozen; }, boolean()),
      field<S>("head", [](auto& s) -> auto& { return s.head; }, enumeration<Head>()),
      field<S>("activation_checkpointing", [](auto& s) -> auto& { return s.activation_checkpointing; }, boolean()),
      field<S>("tokenizer", [](auto& s) -> auto& { return s.tokenizer; }, text()),
      field<S>("optim", [](auto& s) -> auto& { return s.optim; }, optim_codec()),
      only_if<S>(field<S>("lora", [](auto& s) -> auto& { return s.lora; }, lora_codec()),
                 [](const S& s) { return s.lora.enabled(); }),
  }});
}

Codec<RewardConfig> reward_codec() {
  using S = RewardConfig;
  auto is = [](RewardType t) { return [t](const S& s) { return s.type == t; }; };
  StructSpec<S> spec{"a reward", {
      field<S>("type", [](auto& s) -> auto& { return s.type; }, enumeration<RewardType>()),
      only_if<S>(field<S>("extract", [](auto& s) -> auto& { return s.extract; },
                          list_of(enumeration<Extractor>(), 1, SIZE_MAX, true)),
                 is(RewardType::verifiable)),
      field<S>("format_bonus", [](auto& s) -> auto& { return s.format_bonus; }, number(0, HUGE_VAL)),
      only_if<S>(field<S>("model", [](auto& s) -> auto& { return s.model; }, name_ref()), is(RewardType::model)),
      only_if<S>(field<S>("command", [](auto& s) -> auto& { return s.command; }, command_codec()),
                 is(RewardType::command)),
      only_if<S>(field<S>("timeout_s", [](auto& s) -> auto& { return s.timeout_s; },
                          number(0, HUGE_VAL, Bound::kOpen)),
                 is(RewardType::command)),
  }};
  std::vector<std::string> keys;
  for (const auto& f : spec.fields) keys.push_back(f.name);
  spec.check = [keys](S& s, const YNode& n, const std::string& path, Reading& reading) {
    std::string type = to_string(s.type);
    // `comand:` already got "did you mean 'command'?": saying command is missing too is noise.
    auto misspelt = [&](const std::string& key) {
      for (const auto& e : n.entries)
        if (std::find(keys.begin(), keys.end(), e.key) == keys.end() && suggestion(e.key, keys) == key) return true;
      return false;
    };
    auto needs = [&](const char* key, RewardType t, const std::string& example) {
      bool given = n.find(key) != nullptr;
      if (s.type == t && !given && !misspelt(key))
        reading.error(n.pos, join_path(path, key), "missing: a reward of type " + type + " needs it", "add " + example);
      if (s.type != t && given)
        error_at_key(reading, n, path, key, "applies only to type: " + to_string(t) + " (this reward is " + type + ")",
                     "remove it or set `type: " + to_string(t) + "`");
    };
    needs("model", RewardType::model, "`model: ROLE` (a role with head: value)");
    needs("command", RewardType::command, "`command: \"python3 score.py\"`");
    if (s.type != RewardType::command && n.find("timeout_s"))
      error_at_key(reading, n, path, "timeout_s", "applies only to type: command", "remove it");
    if (s.type != RewardType::verifiable && n.find("extract"))
      error_at_key(reading, n, path, "extract", "applies only to type: verifiable", "remove it");
    for (size_t i = 0; i < s.extract.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (s.extract[i] == s.extract[j]) {
          const YNode* list = n.find("extract");
          reading.error(list && list->is_seq() ? list->items[i].pos : n.pos, join_path(path, "extract"),
                    "lists '" + to_string(s.extract[i]) + "' twice", "remove the repeated extractor");
        }
  };
  return structure<S>(std::move(spec));
}

}  // namespace

// `command: "python score.py"` runs through sh -c; a list is the argv itself.
Codec<std::vector<std::string>> command_codec() {
  auto argv = list_of(text(), 1);
  Codec<std::vector<std::string>> c;
  c.type = "a command line (string) or an argv list";
  c.read = [argv](const YNode& n, const std::string& path, Reading& reading, std::vector<std::string>& out) {
    if (n.is_scalar()) {
      if (str::trim(n.scalar).empty()) {
        reading.error(n.pos, path, "is empty", "give the scoring program, e.g. `command: \"python3 score.py\"`");
        return false;
      }
      out = {"sh", "-c", n.scalar};
      return true;
    }
    return argv.read(n, path, reading, out);
  };
  c.write = argv.write;
  return c;
}


Codec<ParallelConfig> parallel_codec(bool training) {
  using S = ParallelConfig;
  StructSpec<S> spec{training ? "a parallel layout" : "a rollout layout", {
      field<S>("tp", [](auto& s) -> auto& { return s.tp; }, integer(1, 1 << 20)),
      field<S>("sp", [](auto& s) -> auto& { return s.sp; }, integer(1, 1 << 20)),
      field<S>("ep", [](auto& s) -> auto& { return s.ep; }, integer(1, 1 << 20)),
      field<S>("pp", [](auto& s) -> auto& { return s.pp; }, integer(1, 1 << 20)),
  }};
  if (!training) return structure<S>(std::move(spec));
  spec.fields.push_back(field<S>("pp_schedule", [](auto& s) -> auto& { return s.pp_schedule; }, enumeration<PpSchedule>()));
  spec.fields.push_back(field<S>("pp_virtual", [](auto& s) -> auto& { return s.pp_virtual; }, integer(1, 1024)));
  spec.fields.push_back(field<S>("pp_layers", [](auto& s) -> auto& { return s.pp_layers; }, list_of(integer(1))));
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    bool interleaved = s.pp_schedule == PpSchedule::interleaved;
    if (interleaved && (s.pp < 2 || s.pp_virtual < 2))
      error_at_key(reading, n, path, "pp_schedule",
                   "the interleaved schedule needs pp ≥ 2 and pp_virtual ≥ 2 (pp = " + std::to_string(s.pp) +
                       ", pp_virtual = " + std::to_string(s.pp_virtual) + ")",
                   "raise pp/pp_virtual or use pp_schedule: 1f1b");
    if (!interleaved && s.pp_virtual > 1)
      error_at_key(reading, n, path, "pp_virtual", "virtual pipeline stages need pp_schedule: interleaved",
                   "set `pp_schedule: interleaved` or remove pp_virtual");
    size_t chunks = static_cast<size_t>(s.pp * s.pp_virtual);
    if (!s.pp_layers.empty() && s.pp_layers.size() != chunks)
      error_at_key(reading, n, path, "pp_layers",
                   "lists " + std::to_string(s.pp_layers.size()) + " stages but pp·pp_virtual = " +
                       std::to_string(s.pp) + "·" + std::to_string(s.pp_virtual) + " = " + std::to_string(chunks),
                   "give one layer count per pipeline stage (" + std::to_string(chunks) + " numbers)");
  };
  return structure<S>(std::move(spec));
}

Codec<std::vector<ModelConfig>> models_codec() { return named_map(model_codec(), "model role", "<role>"); }
Codec<std::vector<RewardConfig>> rewards_codec() { return named_map(reward_codec(), "reward", "<reward>"); }

}  // namespace hpcrl::config::schema
