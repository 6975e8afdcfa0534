// The pipeline loader: shipped configs validate and round-trip through the
// resolved YAML; documented defaults and inherited values are what the docs
// say; positions are 1-based file:line:col; whole-file problems (missing,
// directory, binary, empty) are single clear errors; missing weights are a
// warning for validate and an error for run; docs/config.md covers every key.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "hpcrl/config/loader.h"
#include "hpcrl/config/render.h"
#include "hpcrl/util/strings.h"

using namespace hpcrl;
using namespace hpcrl::config;

namespace {

namespace stdfs = std::filesystem;

std::vector<std::string> error_texts(const LoadResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.diagnostics.errors) out.push_back(e.str());
  return out;
}

std::string joined(const LoadResult& r) { return str::join(error_texts(r), "\n"); }

// A scratch directory removed when the test ends.
struct TempDir {
  stdfs::path path;
  explicit TempDir(const std::string& name) : path(stdfs::temp_directory_path() / ("hpcrl_config_" + name)) {
    stdfs::remove_all(path);
    stdfs::create_directories(path);
  }
  ~TempDir() { stdfs::remove_all(path); }
  std::string write(const std::string& file, const std::string& text) const {
    std::ofstream(path / file, std::ios::binary) << text;
    return (path / file).string();
  }
};

const char* kMinimal = R"(models:
  policy: {init: {preset: tiny}}
  reference: {init: {from: policy}, frozen: true}
  critic: {init: {from: policy}, head: value}
  student: {init: {preset: tiny-2l}}
rewards:
  math: {type: verifiable}
data:
  arith: {synthetic: {task: arithmetic}}
run: {eval_every: 25}
stages:
  - sft: {model: policy, data: arith, steps: 10, batch: 8}
  - grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 2, prompts: 4, kl: {coef: 0.01}}
  - ppo: {policy: policy, critic: critic, reward: math, data: arith, iterations: 2, prompts: 4, lr: 3e-6,
          eval_every: 7}
  - distill: {teacher: policy, student: student, data: arith, steps: 1, batch: 4}
)";

TEST(Loader, QuickstartLoadsWithItsValues) {
  LoadResult r = check_pipeline_config("configs/quickstart.yaml", {}, {});
  ASSERT_TRUE(r.ok()) << joined(r);
  const PipelineConfig& c = r.config;
  EXPECT_EQ(c.run.name, "quickstart");
  EXPECT_EQ(c.run.out, "runs/quickstart");
  ASSERT_EQ(c.stages.size(), 3u);
  EXPECT_EQ(c.stages[0].kind(), StageKind::sft);
  EXPECT_EQ(c.stages[1].kind(), StageKind::grpo);
  EXPECT_EQ(c.stages[2].kind(), StageKind::distill);
  EXPECT_DOUBLE_EQ(std::get<GrpoStage>(c.stages[1].body).clip_low, 0.2);
  EXPECT_DOUBLE_EQ(std::get<GrpoStage>(c.stages[1].body).clip_high, 0.28);
  EXPECT_EQ(std::get<GrpoStage>(c.stages[1].body).rewards, std::vector<std::string>{"math"});
  const ModelConfig& ref = c.model("reference");
  EXPECT_EQ(ref.init.kind, InitKind::from);
  EXPECT_TRUE(ref.frozen);
  ASSERT_TRUE(ref.arch.has_value());  // the source role's architecture
  EXPECT_EQ(ref.arch->num_layers, c.model("policy").arch->num_layers);
  EXPECT_EQ(ref.tokenizer, "byte");
  EXPECT_EQ(c.placement.mode, PlacementMode::colocated);
}

TEST(Loader, EveryShippedConfigValidatesAndRoundTrips) {
  int n = 0;
  for (const auto& e : stdfs::directory_iterator("configs")) {
    if (e.path().extension() != ".yaml") continue;
    ++n;
    std::string path = e.path().string();
    LoadResult r = check_pipeline_config(path, {}, {});
    ASSERT_TRUE(r.ok()) << path << ":\n" << joined(r);
    std::string yaml = to_yaml(r.config);
    LoadResult again = check_pipeline_text(yaml, path, {}, {});
    ASSERT_TRUE(again.ok()) << "resolved YAML of " << path << " does not load:\n" << joined(again) << "\n" << yaml;
    EXPECT_EQ(to_yaml(again.config), yaml) << path;
  }
  EXPECT_GE(n, 3);
}

TEST(Loader, DocumentedDefaultsAndInheritedValues) {
  LoadResult r = check_pipeline_text(kMinimal, "my-pipe.v2.yaml", {}, {});
  ASSERT_TRUE(r.ok()) << joined(r);
  const PipelineConfig& c = r.config;
  EXPECT_EQ(c.run.name, "my-pipe.v2");  // the file's stem
  EXPECT_EQ(c.run.out, "runs/my-pipe.v2");
  EXPECT_EQ(c.run.seed, 1);
  EXPECT_EQ(c.run.device, Device::cpu);
  EXPECT_EQ(c.run.dtype, DType::float32);
  EXPECT_EQ(c.run.keep_last, 2);
  EXPECT_TRUE(c.trace.chrome && c.trace.metrics && c.trace.comm);
  EXPECT_EQ(c.data[0].synthetic.seed, 1);  // run.seed
  EXPECT_EQ(c.data[0].synthetic.train, 20000);
  EXPECT_EQ(std::get<SftStage>(c.stages[0].body).eval_every, 25);  // run.eval_every
  const GrpoStage& g = std::get<GrpoStage>(c.stages[1].body);
  EXPECT_EQ(g.group, 8);
  EXPECT_DOUBLE_EQ(g.clip_low, 0.2);
  EXPECT_DOUBLE_EQ(g.clip_high, 0.2);
  EXPECT_EQ(g.kl.estimator, KlEstimator::k3);
  EXPECT_EQ(g.loss_agg, LossAgg::token_mean);
  EXPECT_EQ(g.std_norm, StdNorm::group);
  EXPECT_EQ(g.advantage, AdvantageEstimator::grpo);
  EXPECT_EQ(g.policy_loss, PolicyLossKind::ppo_clip);
  EXPECT_EQ(g.epochs, 1);
  EXPECT_EQ(g.reference, "reference");
  const PpoStage& p = std::get<PpoStage>(c.stages[2].body);
  EXPECT_EQ(p.reference, "");
  EXPECT_EQ(p.group, 1);
  EXPECT_EQ(p.eval_every, 7);           // its own
  EXPECT_DOUBLE_EQ(p.critic_lr, 3e-6);  // the stage lr
  EXPECT_DOUBLE_EQ(p.lam, 0.95);
  const ModelConfig& critic = c.model("critic");
  EXPECT_EQ(critic.head, Head::value);
  EXPECT_EQ(critic.tokenizer, "byte");
  EXPECT_EQ(c.models[0].rollout.parallel.tp, 1);
  EXPECT_EQ(c.rewards[0].extract, (std::vector<Extractor>{Extractor::boxed, Extractor::answer_tag, Extractor::hash,
                                                          Extractor::answer_is, Extractor::last_number}));
}

// Generation that may lag defaults to the decoupled objective (the trainer recomputes π_old); written
// recompute_old_logprobs: false asks for the coupled one, and the resolved file keeps the choice.
TEST(Loader, AsyncGenerationIsDecoupledUnlessRecomputeIsWrittenFalse) {
  const std::string async = std::string(kMinimal) + R"(placement:
  mode: disaggregated
  ranges: {policy: [0, 0], reference: [0, 0], critic: [0, 0], student: [0, 0], policy.rollout: [1, 1]}
)";
  const std::vector<std::string> lag{"stages[1].grpo.async.max_staleness=1"};
  LoadResult implied = check_pipeline_text(async, "p.yaml", lag, {});
  ASSERT_TRUE(implied.ok()) << joined(implied);
  EXPECT_TRUE(std::get<GrpoStage>(implied.config.stages[1].body).recompute_old_logprobs);
  EXPECT_TRUE(std::get<GrpoStage>(implied.config.stages[1].body).decoupled());
  std::vector<std::string> coupled_sets = lag;
  coupled_sets.push_back("stages[1].grpo.recompute_old_logprobs=false");
  LoadResult coupled = check_pipeline_text(async, "p.yaml", coupled_sets, {});
  ASSERT_TRUE(coupled.ok()) << joined(coupled);
  EXPECT_FALSE(std::get<GrpoStage>(coupled.config.stages[1].body).recompute_old_logprobs);
  EXPECT_FALSE(std::get<GrpoStage>(coupled.config.stages[1].body).decoupled());
  LoadResult again = check_pipeline_text(to_yaml(coupled.config), "p.yaml", {}, {});
  ASSERT_TRUE(again.ok()) << joined(again);
  EXPECT_FALSE(std::get<GrpoStage>(again.config.stages[1].body).decoupled());
  EXPECT_EQ(std::get<GrpoStage>(again.config.stages[1].body).async.max_staleness, 1);
}

TEST(Loader, RolloutLayoutInheritsUnsetDegrees) {
  std::string text = kMinimal;
  text.replace(text.find("policy: {init: {preset: tiny}}"), 30,
               "policy: {init: {preset: tiny}, parallel: {tp: 2, pp: 2}, rollout: {parallel: {pp: 1}}}");
  LoadResult r = check_pipeline_text(text, "p.yaml", {}, {});
  ASSERT_TRUE(r.ok()) << joined(r);
  const ParallelConfig& roll = r.config.models[0].rollout.parallel;
  EXPECT_EQ(roll.tp, 2);
  EXPECT_EQ(roll.pp, 1);
}

TEST(Loader, PositionsAreOneBasedLineAndColumn) {
  LoadResult r = check_pipeline_text(kMinimal, "p.yaml", {}, {});
  ASSERT_TRUE(r.ok()) << joined(r);
  SourcePos steps = r.config.pos("stages[0].sft.steps");
  EXPECT_EQ(steps.str(), "p.yaml:12:46");
  // A key never written falls back to its nearest written ancestor.
  EXPECT_EQ(r.config.pos("stages[0].sft.warmup").str(), "p.yaml:12:10");
  EXPECT_EQ(r.config.pos("trace.chrome").str(), "p.yaml");
}

TEST(Loader, ThrowsConfigErrorListingEveryError) {
  TempDir dir("throws");
  std::string text = kMinimal;
  text.replace(text.find("steps: 10"), 9, "steps: 0");
  text.replace(text.find("prompts: 4, kl"), 14, "promts: 4, kl");  // no second error for the missing `prompts`
  text.replace(text.find("lr: 3e-6"), 8, "lr: 3");
  std::string path = dir.write("p.yaml", text);
  try {
    load_pipeline_config(path, {}, {});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    ASSERT_EQ(e.errors().size(), 3u) << e.what();
    EXPECT_EQ(e.errors()[0].str(), path + ":12:46: stages[0].sft.steps: must be ≥ 1 (got 0); use a value ≥ 1");
    EXPECT_EQ(e.errors()[1].str(), path + ":13:92: stages[1].grpo.promts: unknown key 'promts'; did you mean 'prompts'?");
    EXPECT_EQ(e.errors()[2].str(), path + ":14:101: stages[2].ppo.lr: must be in (0, 1] (got 3); use a value in (0, 1]");
    EXPECT_EQ(std::string(e.what()), e.errors()[0].str() + "\n" + e.errors()[1].str() + "\n" + e.errors()[2].str());
  }
}

TEST(Loader, WholeFileProblemsAreOneClearError) {
  TempDir dir("files");
  auto only_error = [](const std::string& path) {
    LoadResult r = check_pipeline_config(path, {}, {});
    EXPECT_EQ(r.diagnostics.errors.size(), 1u) << joined(r);
    return r.diagnostics.errors.empty() ? std::string() : r.diagnostics.errors[0].str();
  };
  std::string missing = (dir.path / "nope.yaml").string();
  EXPECT_EQ(only_error(missing), missing + ": no such file; check the path (it is relative to the current directory)");
  EXPECT_EQ(only_error(dir.path.string()), dir.path.string() + ": is a directory, not a pipeline file; give the path of "
                                                               "a .yaml file, e.g. configs/quickstart.yaml");
  std::string bin = dir.write("weights.yaml", std::string("PK\x03\x04\0\0binary", 12));
  EXPECT_EQ(only_error(bin), bin + ": is not a text file (NUL byte at offset 4); give a YAML pipeline file, not a binary");
  std::string empty = dir.write("empty.yaml", "");
  EXPECT_EQ(only_error(empty), empty + ": is empty (no YAML content); write a pipeline; configs/quickstart.yaml is a "
                                       "complete example");
  std::string comments = dir.write("comments.yaml", "# nothing here\n\n");
  EXPECT_EQ(only_error(comments), comments + ": is empty (no YAML content); write a pipeline; configs/quickstart.yaml "
                                             "is a complete example");
  std::string scalar = dir.write("scalar.yaml", "hello\n");
  EXPECT_EQ(only_error(scalar), scalar + ":1:1: the top level must be a mapping (run:, models:, data:, stages:, ...), "
                                         "got 'hello'; start from configs/quickstart.yaml");
}

TEST(Loader, MissingWeightsWarnInValidateAndFailInRun) {
  TempDir dir("weights");
  stdfs::create_directories(dir.path / "model");
  stdfs::copy_file("configs/models/qwen2.5-1.5b/config.json", dir.path / "model/config.json");
  std::string model = (dir.path / "model").string();
  std::string text = kMinimal;
  text.replace(text.find("{preset: tiny}"), 14, "{path: " + model + "}");
  text.replace(text.find("{preset: tiny-2l}"), 17, "{from: policy}");  // same vocabulary as its teacher
  LoadResult warn = check_pipeline_text(text, "p.yaml", {}, {});
  ASSERT_TRUE(warn.ok()) << joined(warn);
  EXPECT_EQ(warn.config.model("policy").arch->vocab_size, 151936);
  EXPECT_EQ(warn.config.model("critic").arch->num_layers, 28);  // from policy
  EXPECT_EQ(warn.config.model("policy").tokenizer, model);
  ASSERT_EQ(warn.diagnostics.warnings.size(), 2u);
  EXPECT_EQ(warn.diagnostics.warnings[0].str(),
            "p.yaml:2:25: models.policy.init.path: no weights in '" + model +
                "' (model.safetensors or model.safetensors.index.json); `run` will fail; put the checkpoint there, or "
                "--set models.policy.init.path=DIR");
  ValidateOptions run;
  run.require_weights = true;
  LoadResult fail = check_pipeline_text(text, "p.yaml", {}, run);
  ASSERT_EQ(fail.diagnostics.errors.size(), 2u) << joined(fail);  // weights and tokenizer.json
  EXPECT_NE(fail.diagnostics.errors[0].message.find("no weights"), std::string::npos);
  EXPECT_NE(fail.diagnostics.errors[1].message.find("no tokenizer.json"), std::string::npos);
  std::ofstream(dir.path / "model/model.safetensors") << "x";
  std::ofstream(dir.path / "model/tokenizer.json") << "{}";
  LoadResult ok = check_pipeline_text(text, "p.yaml", {}, run);
  EXPECT_TRUE(ok.ok()) << joined(ok);
  EXPECT_TRUE(ok.config.model("policy").weights_present);
}

// A checkpoint directory without tokenizer.json (hpcrl's own, trained with the
// byte tokenizer) with `tokenizer: byte`: the roles copied from it get byte too.
TEST(Loader, RolesCopiedFromANamedTokenizerRoleInheritIt) {
  TempDir dir("byte-ckpt");
  stdfs::create_directories(dir.path / "model");
  stdfs::copy_file("configs/models/qwen2.5-1.5b/config.json", dir.path / "model/config.json");
  std::ofstream(dir.path / "model/model.safetensors") << "x";
  std::string text = kMinimal;
  text.replace(text.find("{preset: tiny}}"), 15, "{path: " + (dir.path / "model").string() + "}, tokenizer: byte}");
  text.replace(text.find("{preset: tiny-2l}"), 17, "{from: policy}");
  ValidateOptions run;
  run.require_weights = true;
  LoadResult r = check_pipeline_text(text, "p.yaml", {}, run);
  ASSERT_TRUE(r.ok()) << joined(r);
  EXPECT_EQ(r.config.model("policy").tokenizer, "byte");
  EXPECT_EQ(r.config.model("critic").tokenizer, "byte");
}

TEST(Loader, WorldSizeEnablesRankChecks) {
  std::string text = kMinimal;
  text.replace(text.find("policy: {init: {preset: tiny}}"), 30,
               "policy: {init: {preset: tiny}, parallel: {tp: 2}}");
  ValidateOptions four;
  four.world = 4;
  EXPECT_TRUE(check_pipeline_text(text, "p.yaml", {}, four).ok());
  ValidateOptions three;
  three.world = 3;
  LoadResult r = check_pipeline_text(text, "p.yaml", {}, three);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.diagnostics.errors[0].str(),
            "p.yaml:2:44: models.policy.parallel: role 'policy': tp·sp·pp = 2·1·1 = 2 does not divide the role's 3 "
            "ranks; choose tp, sp, pp whose product divides 3 (one of 1, 3); dp = ranks / (tp·sp·pp)");
}

TEST(Loader, DocsDescribeEveryKey) {
  std::ifstream in("docs/config.md");
  ASSERT_TRUE(in) << "docs/config.md missing";
  std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> missing;
  for (const auto& key : schema_key_paths())
    if (docs.find("`" + key + "`") == std::string::npos) missing.push_back(key);
  EXPECT_TRUE(missing.empty()) << "docs/config.md does not document: " << str::join(missing, ", ");
  EXPECT_GT(schema_key_paths().size(), 100u);
  // And the other way round: every key in the first column of a table exists.
  auto keys = schema_key_paths();
  std::istringstream lines(docs);
  std::string line;
  std::vector<std::string> stale;
  while (std::getline(lines, line)) {
    if (!str::starts_with(line, "| `")) continue;
    std::string cell = line.substr(2, line.find(" |", 2) - 2);
    for (size_t open = cell.find('`'), close; open != std::string::npos; open = cell.find('`', close + 1)) {
      close = cell.find('`', open + 1);
      if (close == std::string::npos) break;
      std::string key = cell.substr(open + 1, close - open - 1);
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) stale.push_back(key);
    }
  }
  EXPECT_TRUE(stale.empty()) << "docs/config.md documents keys the schema does not have: " << str::join(stale, ", ");
}

// A parser of user input must survive anything: random edits of a valid file
// either still load or give errors that point inside the file.
TEST(Loader, MutatedFilesNeverCrashAndErrorsPointIntoTheFile) {
  std::ifstream in("configs/quickstart.yaml");
  std::string original((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(original.empty());
  int lines = static_cast<int>(std::count(original.begin(), original.end(), '\n')) + 1;
  const std::string alphabet = "{}[]:,-#&*!|>'\"%@` \n\tab01.~";
  std::mt19937 rng(1234);
  int failed_loads = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::string text = original;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text.erase(at, 1 + rng() % 8); break;
        case 1: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        default: text[at] = alphabet[rng() % alphabet.size()]; break;
      }
    }
    LoadResult r;
    ASSERT_NO_THROW(r = check_pipeline_text(text, "m.yaml", {}, {})) << text;
    failed_loads += !r.ok();
    for (const auto& d : r.diagnostics.errors) {
      EXPECT_EQ(d.pos.file, "m.yaml") << d.str();
      EXPECT_LE(d.pos.line, lines + 2) << d.str();
      EXPECT_FALSE(d.message.empty()) << d.str();
      EXPECT_FALSE(d.fix.empty()) << d.str();
    }
  }
  EXPECT_GT(failed_loads, 100);  // the edits do break files; this is not a no-op
}

TEST(Loader, SummaryNamesRolesStagesAndRanks) {
  LoadResult r = check_pipeline_config("configs/quickstart.yaml", {}, {});
  ASSERT_TRUE(r.ok()) << joined(r);
  ValidateOptions opt;
  opt.world = 2;
  std::string s = summarize(r.config, opt);
  EXPECT_NE(s.find("configs/quickstart.yaml: valid"), std::string::npos) << s;
  EXPECT_NE(s.find("policy     preset tiny [llama 4L d128"), std::string::npos) << s;
  EXPECT_NE(s.find("; tp1 sp1 ep1 pp1 dp2"), std::string::npos) << s;
  EXPECT_NE(s.find("0. sft      policy on arith: 300 steps x batch 64, lr 0.001, or until held-out accuracy 0.4\n"),
            std::string::npos) << s;
  EXPECT_NE(s.find("1. grpo     policy (reference: reference) on arith, reward math: 80 iterations x 32 prompts x 8"),
            std::string::npos) << s;
  EXPECT_NE(s.find("ranks needed: a multiple of 1 (checked for --world 2)"), std::string::npos) << s;
}

TEST(Loader, DisaggregatedSummaryMapsEachRoleAndItsGenerationToRanks) {
  LoadResult r = check_pipeline_config("configs/gsm8k-qwen2.5-1.5b-perlmutter-async.yaml", {}, {8, false});
  ASSERT_TRUE(r.ok()) << joined(r);
  ValidateOptions opt;
  opt.world = 8;
  std::string s = summarize(r.config, opt);
  EXPECT_NE(s.find("; train tp1 sp1 ep1 pp1 dp4 on ranks 0-3, rollout tp2 sp1 ep1 pp1 dp2 on ranks 4-7"),
            std::string::npos) << s;
  EXPECT_NE(s.find("frozen"), std::string::npos) << s;
}

}  // namespace
