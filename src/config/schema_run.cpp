// Schema of the `run`, `trace` and `placement` sections and of the file's top
// level (see docs/config.md for every key's meaning and default).
#include <cctype>
#include <cmath>

#include "config/schema_sections.h"

namespace hpcrl::config::schema {

namespace {

Codec<EvalSampling> eval_sampling_codec() {
  using S = EvalSampling;
  return structure<S>({"evaluation sampling settings", {
      field<S>("prompts", [](auto& s) -> auto& { return s.prompts; }, integer(0)),
      field<S>("n", [](auto& s) -> auto& { return s.n; }, integer(1)),
      field<S>("temperature", [](auto& s) -> auto& { return s.temperature; }, number(0, 100)),
      field<S>("top_p", [](auto& s) -> auto& { return s.top_p; }, number(0, 1, Bound::kOpen)),
      field<S>("max_new_tokens", [](auto& s) -> auto& { return s.max_new_tokens; }, integer(1)),
  }});
}

// Inclusive rank ranges: `role: [first, last]`.
Codec<std::vector<RankRange>> ranges_codec() {
  Codec<std::vector<RankRange>> c;
  c.type = "a mapping of role (or role.rollout) to [first, last] ranks";
  auto pair = list_of(integer(0), 2, 2);
  c.read = [pair, type = c.type](const YNode& n, const std::string& path, Reading& reading, std::vector<RankRange>& out) {
    if (!n.is_map()) {
      reading.error(n.pos, path, "expected " + type + ", got " + n.describe(),
                "write e.g. `ranges: {policy: [0, 3], policy.rollout: [4, 7]}`");
      return false;
    }
    bool ok = true;
    for (const auto& e : n.entries) {
      std::string kp = join_path(path, e.key);
      reading.positions[kp] = e.value.pos;
      reading.key_positions[kp] = e.key_pos;
      std::vector<int64_t> v;
      if (!pair.read(e.value, kp, reading, v)) {
        ok = false;
        continue;
      }
      if (v[0] > v[1]) {
        reading.error(e.value.pos, kp, "first rank " + std::to_string(v[0]) + " is after last rank " + std::to_string(v[1]),
                  "write [first, last] with first ≤ last (both inclusive)");
        ok = false;
        continue;
      }
      out.push_back({e.key, v[0], v[1]});
    }
    return ok;
  };
  c.write = [pair](const std::vector<RankRange>& v) {
    YNode m = YNode::map_node();
    for (const auto& r : v) m.entries.push_back({r.target, {}, pair.write({r.first, r.last})});
    return m;
  };
  return c;
}

}  // namespace

constexpr size_t kMaxRunName = 128;

bool valid_run_name(const std::string& name) {
  if (name.empty() || name[0] == '.') return false;
  for (char ch : name)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.')) return false;
  return true;
}

Codec<RunConfig> run_codec() {
  using S = RunConfig;
  StructSpec<S> spec{"the run section", {
      field<S>("name", [](auto& s) -> auto& { return s.name; }, text()),
      field<S>("out", [](auto& s) -> auto& { return s.out; }, text()),
      field<S>("seed", [](auto& s) -> auto& { return s.seed; }, integer(0)),
      field<S>("device", [](auto& s) -> auto& { return s.device; }, enumeration<Device>()),
      field<S>("dtype", [](auto& s) -> auto& { return s.dtype; }, enumeration<DType>()),
      field<S>("checkpoint_every", [](auto& s) -> auto& { return s.checkpoint_every; }, integer(0)),
      field<S>("keep_last", [](auto& s) -> auto& { return s.keep_last; }, integer(1)),
      field<S>("eval_every", [](auto& s) -> auto& { return s.eval_every; }, integer(0)),
      field<S>("eval_before_train", [](auto& s) -> auto& { return s.eval_before_train; }, boolean()),
      field<S>("eval_sampling", [](auto& s) -> auto& { return s.eval_sampling; }, eval_sampling_codec()),
      // Written back only when changed, so resolved configs of runs without it stay as they were.
      only_if<S>(field<S>("comm_timeout_s", [](auto& s) -> auto& { return s.comm_timeout_s; }, number(0, HUGE_VAL)),
                 [](const S& s) { return s.comm_timeout_s != RunConfig{}.comm_timeout_s; }),
      only_if<S>(field<S>("check_memory", [](auto& s) -> auto& { return s.check_memory; }, boolean()),
                 [](const S& s) { return !s.check_memory; }),
  }};
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    if (n.find("name") && s.name.size() > kMaxRunName)
      reading.error(reading.value_pos(join_path(path, "name"), n.pos), join_path(path, "name"),
                    "run name is " + std::to_string(s.name.size()) + " characters long; a directory name may have " +
                        std::to_string(kMaxRunName) + " here (file systems allow 255, and checkpoints add to it)",
                    "use a shorter name");
    else if (n.find("name") && !s.name.empty() && !valid_run_name(s.name))
      reading.error(reading.value_pos(join_path(path, "name"), n.pos), join_path(path, "name"),
                "run name '" + s.name + "' is not a plain directory name",
                "use letters, digits, '.', '_' and '-' only (it names runs/<name>)");
  };
  return structure<S>(std::move(spec));
}

Codec<TraceConfig> trace_codec() {
  using S = TraceConfig;
  return structure<S>({"the trace section", {
      field<S>("chrome", [](auto& s) -> auto& { return s.chrome; }, boolean()),
      field<S>("metrics", [](auto& s) -> auto& { return s.metrics; }, boolean()),
      field<S>("comm", [](auto& s) -> auto& { return s.comm; }, boolean()),
      field<S>("tensorboard", [](auto& s) -> auto& { return s.tensorboard; }, boolean()),
  }});
}

Codec<PlacementConfig> placement_codec() {
  using S = PlacementConfig;
  StructSpec<S> spec{"the placement section", {
      field<S>("mode", [](auto& s) -> auto& { return s.mode; }, enumeration<PlacementMode>()),
      only_if<S>(field<S>("ranges", [](auto& s) -> auto& { return s.ranges; }, ranges_codec()),
                 [](const S& s) { return s.mode == PlacementMode::disaggregated; }),
  }};
  spec.scalar_key = "mode";  // `placement: disaggregated`
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    const YNode* ranges = n.find("ranges");
    if (s.mode == PlacementMode::colocated && ranges) {
      error_at_key(reading, n, path, "ranges", "rank ranges apply only to mode: disaggregated",
                   "remove `ranges` or set `mode: disaggregated`");
    }
    if (s.mode == PlacementMode::disaggregated && !ranges) {
      const YNode* mode = n.find("mode");
      reading.error(mode ? mode->pos : n.pos, join_path(path, "ranges"),
                "mode: disaggregated needs a rank range for every role",
                "add e.g. `ranges: {policy: [0, 3], policy.rollout: [4, 7]}`");
    }
  };
  return structure<S>(std::move(spec));
}

const Codec<PipelineConfig>& pipeline_codec() {
  using S = PipelineConfig;
  static const Codec<PipelineConfig> codec = structure<S>({"a pipeline", {
      field<S>("run", [](auto& s) -> auto& { return s.run; }, run_codec()),
      field<S>("models", [](auto& s) -> auto& { return s.models; }, models_codec(), kRequired),
      field<S>("rewards", [](auto& s) -> auto& { return s.rewards; }, rewards_codec()),
      field<S>("tools", [](auto& s) -> auto& { return s.tools; }, tools_codec()),
      field<S>("data", [](auto& s) -> auto& { return s.data; }, data_codec(), kRequired),
      field<S>("placement", [](auto& s) -> auto& { return s.placement; }, placement_codec()),
      field<S>("stages", [](auto& s) -> auto& { return s.stages; }, stages_codec(), kRequired),
      field<S>("trace", [](auto& s) -> auto& { return s.trace; }, trace_codec()),
  }});
  return codec;
}

}  // namespace hpcrl::config::schema
