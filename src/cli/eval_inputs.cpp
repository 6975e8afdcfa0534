// Command-line data and reward specs of `hpcrl eval` (see eval_inputs.h). The
// pipeline-file forms go through the same loader, validation and dataset code
// as `hpcrl run`, so an evaluation sees exactly the prompts a run trains on.
#include "cli/eval_inputs.h"

#include <spdlog/fmt/fmt.h>

#include <cstring>
#include <utility>
#include <variant>

#include "hpcrl/algo/objectives/reward_fn.h"
#include "hpcrl/config/enums.h"
#include "hpcrl/config/loader.h"
#include "hpcrl/io/dataset_jsonl.h"
#include "hpcrl/io/synthetic.h"
#include "hpcrl/reward/answer_extract.h"
#include "hpcrl/runner/data_loader.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/overloaded.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::cli {
namespace {

// "x.yaml:name" → {"x.yaml", "name"}; "x.yaml" → {"x.yaml", ""}; anything else → nullopt.
std::optional<std::pair<std::string, std::string>> pipeline_ref(const std::string& spec) {
  for (const char* ext : {".yaml", ".yml"}) {
    if (str::ends_with(spec, ext)) return std::make_pair(spec, std::string());
    size_t p = spec.rfind(std::string(ext) + ":");
    if (p != std::string::npos) return std::make_pair(spec.substr(0, p + std::strlen(ext)), spec.substr(p + std::strlen(ext) + 1));
  }
  return std::nullopt;
}

// The entry called `name` among `names` (the only one when `name` is empty).
std::string pick_name(const std::string& flag, const std::string& file, const std::string& section,
                      const std::string& name, const std::vector<std::string>& names) {
  const std::string listed = names.empty() ? "none" : str::join(names, ", ");
  if (name.empty()) {
    HPCRL_CHECK_INPUT(names.size() == 1, flag << " " << file << ": the file's " << section << ": section has "
                                              << names.size() << " entries (" << listed << "); name one as " << flag
                                              << " " << file << ":NAME");
    return names.front();
  }
  for (const auto& n : names)
    if (n == name) return n;
  std::string hint = str::closest(name, names);
  throw InputError(flag + " " + file + ":" + name + ": " + file + " has no " + section + " entry '" + name + "'" +
                   (hint.empty() ? "" : "; did you mean '" + hint + "'?") + " (it has: " + listed + ")");
}

int64_t parse_int(const std::string& flag, const std::string& key, const std::string& value) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  HPCRL_CHECK_INPUT(used == value.size() && !value.empty(),
                    flag << ": " << key << "=" << value << " is not an integer; write e.g. " << key << "=2");
  return v;
}

// "synthetic" or "synthetic:digits=2,terms=3,ops=+-,eval=200,seed=1".
io::SyntheticConfig parse_synthetic(const std::string& spec) {
  const std::string flag = "--data " + spec;
  io::SyntheticConfig sc;
  sc.seed = 1;   // run.seed's default, so `synthetic` alone is the quickstart's split
  sc.train = 1;  // the held-out split does not depend on the train size; generate none to speak of
  const std::string body = spec.size() > 10 ? spec.substr(10) : "";
  const std::vector<std::string> keys = {"task", "digits", "terms", "ops", "eval", "seed"};
  for (const std::string& item : body.empty() ? std::vector<std::string>{} : str::split(body, ',')) {
    size_t eq = item.find('=');
    HPCRL_CHECK_INPUT(eq != std::string::npos && eq > 0,
                      flag << ": '" << item << "' is not key=value; write e.g. synthetic:digits=2,eval=200");
    const std::string key = str::trim(item.substr(0, eq)), value = str::trim(item.substr(eq + 1));
    if (key == "task") sc.task = value;
    else if (key == "digits") sc.digits = static_cast<int>(parse_int(flag, key, value));
    else if (key == "terms") sc.terms = static_cast<int>(parse_int(flag, key, value));
    else if (key == "ops") sc.ops = value;
    else if (key == "eval") sc.eval = static_cast<size_t>(std::max<int64_t>(0, parse_int(flag, key, value)));
    else if (key == "seed") sc.seed = static_cast<uint64_t>(parse_int(flag, key, value));
    else if (key == "train")
      throw InputError(flag + ": train=… does not apply: eval reads the held-out split, which does not depend on "
                       "the train size; remove it");
    else {
      std::string hint = str::closest(key, keys);
      throw InputError(flag + ": unknown key '" + key + "'" + (hint.empty() ? "" : "; did you mean '" + hint + "'?") +
                       " (keys: " + str::join(keys, ", ") + ")");
    }
  }
  io::validate_synthetic(sc, "--data synthetic");
  HPCRL_CHECK_INPUT(sc.eval >= 1, flag << ": eval=0 leaves nothing to evaluate; ask for at least one problem");
  return sc;
}

config::ChatTemplate parse_template(const std::string& name) {
  if (auto t = config::parse_enum<config::ChatTemplate>(name)) return *t;
  const auto& names = config::names_of<config::ChatTemplate>();
  std::string hint = str::closest(name, names);
  throw InputError("--chat-template '" + name + "'" + (hint.empty() ? "" : ": did you mean '" + hint + "'?") +
                   " (one of " + str::join(names, ", ") + ")");
}

EvalData pipeline_data(const std::string& spec, const std::string& file, const std::string& name,
                       const io::Tokenizer& tokenizer) {
  config::PipelineConfig cfg = config::load_pipeline_config(file, {}, {});
  std::vector<std::string> names;
  for (const auto& d : cfg.data) names.push_back(d.name);
  const config::DatasetConfig& dc = *cfg.find_data(pick_name("--data", file, "data", name, names));
  algo::DataSplits splits = runner::load_data_splits(dc, cfg.run, tokenizer);
  HPCRL_CHECK_INPUT(splits.eval.size() > 0,
                    "--data " << spec << ": data." << dc.name << " of " << file << " has no held-out split; give it "
                              << "one (synthetic `eval: N`, or jsonl `eval_path`/`eval_holdout`), or pass the file "
                              << "to evaluate as --data FILE.jsonl");
  EvalData out;
  out.examples = std::move(splits.eval);
  out.config = std::make_unique<config::DatasetConfig>(dc);
  out.label = file + ":" + dc.name + " (eval split)";
  return out;
}

}  // namespace

EvalData load_eval_data(const std::string& spec, const JsonlFlags& jsonl, const io::Tokenizer& tokenizer) {
  HPCRL_CHECK_INPUT(!spec.empty(), "--data is empty; give FILE.jsonl, synthetic[:key=value,...] or PIPELINE.yaml:NAME");
  if (auto ref = pipeline_ref(spec)) return pipeline_data(spec, ref->first, ref->second, tokenizer);
  EvalData out;
  out.config = std::make_unique<config::DatasetConfig>();
  out.config->name = "eval";
  out.config->shuffle = false;
  if (spec == "synthetic" || str::starts_with(spec, "synthetic:")) {
    io::SyntheticConfig sc = parse_synthetic(spec);
    out.examples = io::make_synthetic(sc).eval;
    out.config->kind = config::DataKind::synthetic;
    out.label = "synthetic:task=" + sc.task + ",digits=" + std::to_string(sc.digits) + ",terms=" +
                std::to_string(sc.terms) + ",ops=" + sc.ops + ",eval=" + std::to_string(sc.eval) + ",seed=" +
                std::to_string(sc.seed);
    return out;
  }
  io::JsonlOptions o;
  o.prompt_key = jsonl.prompt_key;
  o.answer_key = jsonl.answer_key;
  o.answer_marker = jsonl.answer_marker;
  out.examples = io::load_jsonl(spec, o);
  out.config->kind = config::DataKind::jsonl;
  out.config->jsonl.path = spec;
  out.config->jsonl.prompt = jsonl.prompt_key;
  out.config->jsonl.answer = jsonl.answer_key;
  out.config->jsonl.answer_marker = jsonl.answer_marker;
  out.config->jsonl.chat_template = parse_template(jsonl.chat_template);
  out.config->jsonl.system_prompt = jsonl.system_prompt;
  out.label = spec;
  return out;
}

EvalReward parse_reward(const RewardFlags& flags) {
  EvalReward out;
  if (auto ref = pipeline_ref(flags.spec)) {
    HPCRL_CHECK_INPUT(flags.extract.empty() && !flags.format_bonus,
                      "--extract and --format-bonus apply to --reward verifiable; with a pipeline file, set `extract:` "
                      "and `format_bonus:` in its rewards: section, or drop them");
    const auto& [file, name] = *ref;
    config::PipelineConfig cfg = config::load_pipeline_config(file, {}, {});
    std::vector<std::string> names;
    for (const auto& r : cfg.rewards) names.push_back(r.name);
    const config::RewardConfig& rc = *cfg.find_reward(pick_name("--reward", file, "rewards", name, names));
    HPCRL_CHECK_INPUT(rc.type == config::RewardType::verifiable,
                      cfg.pos("rewards." + rc.name).str() << ": rewards." << rc.name << " is of type '"
                      << config::to_string(rc.type) << "'; hpcrl eval scores with verifiable rewards only: name one "
                      << "of type verifiable, or use --reward verifiable");
    out.config = algo::verifiable_config(rc);
    out.label = file + ":" + rc.name;
  } else {
    if (flags.spec != "verifiable") {
      std::string hint = str::closest(flags.spec, {"verifiable"});
      throw InputError("--reward '" + flags.spec + "'" + (hint.empty() ? "" : ": did you mean 'verifiable'?") +
                       "; expected 'verifiable' (with --extract/--format-bonus) or a pipeline file "
                       "PIPELINE.yaml[:REWARD] whose rewards: section holds it");
    }
    if (!flags.extract.empty()) {
      std::vector<std::string> names;
      for (const auto& n : str::split(flags.extract, ',')) names.push_back(str::trim(n));
      out.config.extract = reward::parse_extractors(names, "--extract");
    }
    if (flags.format_bonus) {
      HPCRL_CHECK_INPUT(*flags.format_bonus >= 0, "--format-bonus " << *flags.format_bonus << ": must be >= 0");
      out.config.format_bonus = *flags.format_bonus;
    }
    out.label = "verifiable";
  }
  std::vector<std::string> names;
  for (auto e : out.config.extract) names.push_back(reward::extractor_name(e));
  out.label += " (extract: " + str::join(names, ", ");
  if (out.config.format_bonus > 0) out.label += fmt::format("; format_bonus {}", out.config.format_bonus);
  out.label += ")";
  return out;
}

namespace {
// A stage's tools (evaluations of an sft stage, rollouts and evaluations of grpo/ppo; none for distill).
const config::StageTools& stage_tools(const config::StageConfig& stage) {
  static const config::StageTools kNone;
  return std::visit(util::overloaded{[](const config::SftStage& s) -> const config::StageTools& { return s.tools; },
                                     [](const config::GrpoStage& s) -> const config::StageTools& { return s.tools; },
                                     [](const config::PpoStage& s) -> const config::StageTools& { return s.tools; },
                                     [](const config::DistillStage&) -> const config::StageTools& { return kNone; }},
                    stage.body);
}
}  // namespace

EvalTools load_eval_tools(const std::string& spec, int64_t max_new_tokens) {
  EvalTools out;
  if (spec.empty()) return out;
  const auto ref = pipeline_ref(spec);
  HPCRL_CHECK_INPUT(ref, "--tools '" << spec << "': expected a pipeline file, PIPELINE.yaml[:STAGE], whose stage "
                                     "STAGE (its index in stages:) lists the tools");
  const auto& [file, stage] = *ref;
  config::PipelineConfig cfg = config::load_pipeline_config(file, {}, {});
  std::vector<std::string> with_tools;  // the indices of the stages with tools
  for (size_t i = 0; i < cfg.stages.size(); ++i)
    if (stage_tools(cfg.stages[i]).enabled()) with_tools.push_back(std::to_string(i));
  const size_t index = std::stoul(pick_name("--tools", file, "stages (with tools)", stage, with_tools));
  const config::StageTools& st = stage_tools(cfg.stages[index]);
  HPCRL_CHECK_INPUT(st.reply_tokens < max_new_tokens,
                    "--tools " << spec << ": its replies take up to " << st.reply_tokens
                               << " tokens (reply_tokens), which leaves no room in --max-new-tokens " << max_new_tokens
                               << " for the model's answer after one: raise --max-new-tokens above "
                               << st.reply_tokens);
  out.kit = tools::stage_toolkit(cfg, st);
  out.label = file + ":" + std::to_string(index) + " (" + str::join(st.use, ", ") + ")";
  return out;
}

}  // namespace hpcrl::cli
