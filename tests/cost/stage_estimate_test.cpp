// Stage estimates: how G, A and T compose per placement, lengths a run
// measured, and that the shipped profiles load.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "hpcrl/config/loader.h"
#include "hpcrl/cost/stage_estimate.h"
#include "test_profile.h"

namespace hpcrl::cost {
namespace {

// A GRPO stage on tiny-2l with a reference; `extra` adds placement or overrides.
config::PipelineConfig grpo_config(int64_t world, const std::string& placement, const std::string& stage_extra = "",
                                   bool recompute_old_logprobs = true) {
  const std::string yaml =
      "run: {name: est, seed: 1}\n"
      "models:\n"
      "  policy: {init: {preset: tiny-2l}}\n"
      "  reference: {init: {from: policy}, frozen: true}\n"
      "rewards: {math: {type: verifiable}}\n"
      "data: {arith: {synthetic: {task: arithmetic, digits: 2, train: 64, eval: 8}}}\n" + placement +
      "stages:\n"
      "  - sft: {model: policy, data: arith, steps: 10, batch: 8}\n"
      "  - grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 5, prompts: 8,"
      " group: 4, max_new_tokens: 32, recompute_old_logprobs: " +
      std::string(recompute_old_logprobs ? "true" : "false") + stage_extra + "}\n";
  auto r = config::check_pipeline_text(yaml, "est.yaml", {}, {world, false});
  std::string errors;
  for (const auto& e : r.diagnostics.errors) errors += e.str() + "\n";
  EXPECT_TRUE(r.ok()) << errors;
  return std::move(r.config);
}

HardwareProfile profile() { return load_profile("h100-sxm"); }

const char* kOneAndOne = "placement: {mode: disaggregated, ranges: {policy: [0, 0], reference: [0, 0], "
                         "policy.rollout: [1, 1]}}\n";

TEST(StageEstimate, ColocatedIterationIsGenerationPlusAuxiliaryPlusTraining) {
  // Two mini-batches of 16 of the 32 responses: two optimizer steps, so the old-log-prob pass runs.
  const auto est = estimate_pipeline(grpo_config(1, "", ", mini_batch: 16"), 1, profile(), {});
  ASSERT_EQ(est.size(), 2u);
  const StageEstimate& g = est[1];
  EXPECT_EQ(g.unit, "iteration");
  EXPECT_EQ(g.response, 32);  // max_new_tokens when nothing else is known
  EXPECT_EQ(g.prompt, 64);
  EXPECT_DOUBLE_EQ(g.seconds, g.generation_s + g.aux_s + g.train_s + g.sync_s);
  EXPECT_EQ(g.sync_s, 0.0);  // the policy generates with its own weights
  std::vector<std::string> names;
  for (const auto& s : g.spans) names.push_back(s.name);
  for (const char* n : {"rollout/prefill", "rollout/decode", "old_logprob", "ref_logprob",
                        "actor_update/forward_backward", "actor_update/grad_sync", "actor_update/optimizer"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
}

TEST(StageEstimate, AsynchronousIsTheLongerOfGenerationAndTrainingAndNeverSlower) {
  const auto sync = estimate_pipeline(grpo_config(2, kOneAndOne), 2, profile(), {})[1];
  const auto async =
      estimate_pipeline(grpo_config(2, kOneAndOne, ", async: {max_staleness: 1}"), 2, profile(), {})[1];
  EXPECT_GT(sync.sync_s, 0.0);  // weights cross to the generating rank
  EXPECT_DOUBLE_EQ(sync.seconds, sync.generation_s + sync.aux_s + sync.train_s + sync.sync_s);
  EXPECT_DOUBLE_EQ(async.seconds, std::max(async.generation_s, async.aux_s + async.train_s) + async.sync_s);
  EXPECT_LT(async.seconds, sync.seconds);
  // The reference shares the trainer's rank: its log-probs follow the old ones there (a sum, not a max).
  double old_and_ref = 0;
  for (const auto& s : sync.spans)
    if (s.name == "old_logprob" || s.name == "ref_logprob") old_and_ref += s.cost.seconds();
  EXPECT_DOUBLE_EQ(sync.aux_s, old_and_ref);
}

// The coupled objective takes the engine's log-probs as π_old: the trainer's A is the reference pass alone.
TEST(StageEstimate, CoupledAsyncDropsOnlyTheOldLogProbPass) {
  const std::string lag = ", async: {max_staleness: 1}, mini_batch: 16";  // two steps: the decoupled run has a pass
  const auto decoupled = estimate_pipeline(grpo_config(2, kOneAndOne, lag), 2, profile(), {})[1];
  const auto coupled = estimate_pipeline(grpo_config(2, kOneAndOne, lag, false), 2, profile(), {})[1];
  double old_pass = 0;
  for (const auto& s : decoupled.spans)
    if (s.name == "old_logprob") old_pass += s.cost.seconds();
  EXPECT_GT(old_pass, 0.0);
  for (const auto& s : coupled.spans) EXPECT_NE(s.name, "old_logprob");
  EXPECT_DOUBLE_EQ(coupled.aux_s, decoupled.aux_s - old_pass);
  EXPECT_DOUBLE_EQ(coupled.train_s, decoupled.train_s);
  EXPECT_DOUBLE_EQ(coupled.generation_s, decoupled.generation_s);
}

// One optimizer step a batch: π_old is the update's own forward, so the estimate has no pass for it,
// and the trainer's A is the reference's log-probs alone.
TEST(StageEstimate, OneOptimizerStepABatchHasNoOldLogProbPass) {
  const auto one = estimate_pipeline(grpo_config(1, ""), 1, profile(), {})[1];  // 8 prompts × 4: one mini-batch
  const auto two = estimate_pipeline(grpo_config(1, "", ", mini_batch: 16"), 1, profile(), {})[1];
  double ref = 0, old_pass = 0;
  for (const auto& s : one.spans) {
    EXPECT_NE(s.name, "old_logprob");
    if (s.name == "ref_logprob") ref += s.cost.seconds();
  }
  for (const auto& s : two.spans)
    if (s.name == "old_logprob") old_pass += s.cost.seconds();
  EXPECT_GT(old_pass, 0.0);
  EXPECT_DOUBLE_EQ(one.aux_s, ref);
  EXPECT_DOUBLE_EQ(two.aux_s, ref + old_pass);  // the same reference pass, then the old-log-prob pass
}

TEST(StageEstimate, AReferenceOnRanksOfItsOwnRunsBesideTheTrainer) {
  const auto e = estimate_pipeline(
      grpo_config(3, "placement: {mode: disaggregated, ranges: {policy: [0, 0], reference: [1, 1], "
                     "policy.rollout: [2, 2]}}\n",
                  ", mini_batch: 16"),  // two optimizer steps: the trainer runs an old-log-prob pass
      3, profile(), {})[1];
  double old_lp = 0, ref_lp = 0;
  for (const auto& s : e.spans) {
    if (s.name == "old_logprob") old_lp = s.cost.seconds();
    if (s.name == "ref_logprob") ref_lp = s.cost.seconds();
  }
  EXPECT_GT(ref_lp, 0.0);
  EXPECT_GT(old_lp, 0.0);
  EXPECT_DOUBLE_EQ(e.aux_s, std::max(old_lp, ref_lp));
}

TEST(StageEstimate, GivenLengthsWinOverARunsAndTheRunsOverDefaults) {
  const auto cfg = grpo_config(1, "");
  std::map<int, Shapes> measured;
  measured[1].prompt = 20;
  measured[1].response = 10;
  Shapes given;
  given.response = 16;
  const auto e = estimate_pipeline(cfg, 1, profile(), given, measured)[1];
  EXPECT_EQ(e.response, 16);
  EXPECT_EQ(e.prompt, 20);
}

TEST(StageEstimate, MeasuredShapesComeFromTheRunsMetrics) {
  const auto cfg = grpo_config(1, "");
  const std::string dir = std::filesystem::temp_directory_path() / "hpcrl-cost-run";
  std::filesystem::create_directories(dir);
  // grpo: 8 prompts × 4 = 32 sequences; 960 tokens per iteration (tokens_per_s · seconds) → 30 per sequence,
  // 10 of them response → prompt 20. sft: batch 8, 800 tokens per step → sequence 100.
  std::ofstream(dir + "/metrics.jsonl")
      << R"({"stage":"sft","stage_index":0,"step":1,"time":1,"tokens_per_s":400,"seconds/step":2})" "\n"
      << R"({"stage":"grpo","stage_index":1,"step":1,"time":1,"tokens_per_s":480,"seconds/iteration":2,"response_len/mean":10})" "\n";
  const auto m = measured_shapes(dir, cfg);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_DOUBLE_EQ(m.at(0).sequence, 100.0);
  EXPECT_DOUBLE_EQ(m.at(1).response, 10.0);
  EXPECT_DOUBLE_EQ(m.at(1).prompt, 20.0);
}

TEST(HardwareProfile, EveryShippedProfileLoads) {
  const auto names = shipped_profiles();
  for (const char* n : {"a100-40gb", "a100-80gb", "h100-sxm", "h200", "h20", "cpu"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  for (const auto& n : names) {
    const HardwareProfile p = load_profile(n);
    EXPECT_GT(p.flops(), 0) << n;
    EXPECT_LE(p.compute_efficiency, 1.0) << n;
  }
}

// An engine mode that changes how decode steps are costed moves the decode span and no other.
void expect_only_decode_shorter(const StageEstimate& before, const StageEstimate& after) {
  ASSERT_EQ(before.spans.size(), after.spans.size());
  for (size_t i = 0; i < before.spans.size(); ++i) {
    if (before.spans[i].name == "rollout/decode")
      EXPECT_LT(after.spans[i].cost.seconds(), before.spans[i].cost.seconds());
    else
      EXPECT_EQ(after.spans[i].cost.seconds(), before.spans[i].cost.seconds()) << before.spans[i].name;
  }
}

TEST(StageEstimate, DecodeGraphsShortenOnlyTheDecodeSpan) {
  Shapes graphs;
  graphs.engine.decode_graphs = true;
  const StageEstimate eager = estimate_pipeline(grpo_config(1, ""), 1, profile(), {})[1];
  const StageEstimate replayed = estimate_pipeline(grpo_config(1, ""), 1, profile(), graphs)[1];
  EXPECT_TRUE(replayed.engine.decode_graphs);
  expect_only_decode_shorter(eager, replayed);
  HardwareProfile without = profile();
  without.graph_kernel_overhead_s = 0;
  try {
    estimate_pipeline(grpo_config(1, ""), 1, without, graphs);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--decode-graphs needs the hardware profile's graph_kernel_overhead_s"),
              std::string::npos) << e.what();
  }
}

// The default lengths leave no tail (mean = max = max_new_tokens); a run's longest response of 32 against a mean
// of 8 does, and partial rollouts drop exactly it.
TEST(StageEstimate, PartialRolloutsShortenOnlyTheDecodeSpanAndAreReported) {
  Shapes tail;
  tail.response = 8;
  tail.max_response = 32;
  Shapes paused = tail;
  paused.engine.partial_rollouts = true;
  const StageEstimate waits = estimate_pipeline(grpo_config(1, ""), 1, profile(), tail)[1];
  const StageEstimate resumes = estimate_pipeline(grpo_config(1, ""), 1, profile(), paused)[1];
  expect_only_decode_shorter(waits, resumes);
  EXPECT_FALSE(estimate_json({waits}, profile())["stages"][0]["partial_rollouts"].get<bool>());
  EXPECT_TRUE(estimate_json({resumes}, profile())["stages"][0]["partial_rollouts"].get<bool>());
}

// A stage that runs partial rollouts (async.partial_rollouts) is costed as --partial-rollouts asks, without the flag.
TEST(StageEstimate, AStageWithPartialRolloutsIsCostedWithThem) {
  Shapes tail;
  tail.response = 8;
  tail.max_response = 32;
  Shapes flagged = tail;
  flagged.engine.partial_rollouts = true;
  const StageEstimate by_flag =
      estimate_pipeline(grpo_config(2, kOneAndOne, ", async: {max_staleness: 2}"), 2, profile(), flagged)[1];
  const StageEstimate by_stage = estimate_pipeline(
      grpo_config(2, kOneAndOne, ", async: {max_staleness: 2, partial_rollouts: true}"), 2, profile(), tail)[1];
  EXPECT_TRUE(by_stage.engine.partial_rollouts);
  const StageEstimate without =
      estimate_pipeline(grpo_config(2, kOneAndOne, ", async: {max_staleness: 2}"), 2, profile(), tail)[1];
  expect_only_decode_shorter(without, by_stage);  // not vacuous: the tail of 32 against 8 is gone
  ASSERT_EQ(by_stage.spans.size(), by_flag.spans.size());
  for (size_t i = 0; i < by_flag.spans.size(); ++i)
    EXPECT_DOUBLE_EQ(by_stage.spans[i].cost.seconds(), by_flag.spans[i].cost.seconds()) << by_flag.spans[i].name;
}

TEST(HardwareProfile, AMissingValueNamesTheFileAndKey) {
  try {
    parse_profile("name: x\ncompute: {peak_flops: 1e12}\n", "x.yaml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "x.yaml: missing `compute.efficiency` (a positive number)");
  }
  try {
    parse_profile("name: x\ncompute: {peak_flops: -1, efficiency: 0.5}\n", "x.yaml");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "x.yaml:2: `compute.peak_flops` must be positive, not -1");
  }
}

using cost_test::profile_error;

TEST(HardwareProfile, MalformedValuesAreErrorsNotCrashes) {
  // Found by the hardware_profile fuzz target: "256:61e+10" (no space after
  // the colon) is one key with a null value, which used to escape as
  // YAML::TypedBadConversion and end the process.
  const std::string rest =
      "memory: {bandwidth: 1e10, efficiency: 1, capacity: 1e9}\nkernel_overhead_s: 1e-6\n"
      "intra_node: {bandwidth: 1e9, latency_s: 1e-6}\ninter_node: {bandwidth: 1e9, latency_s: 1e-6}\n";
  EXPECT_EQ(profile_error("compute: {peak_flops: 3e10, efficiency: 1,\n  by_width: {128: 1e10, 256:61e+10}}\n" + rest +
                          "gpus_per_node: 1\n"),
            "x.yaml:2: `compute.by_width` key '256:61e+10' must be a positive model width, e.g. {128: 1.1e10, 512: "
            "2.5e10}");
  EXPECT_EQ(profile_error("compute: {peak_flops: 3e10, efficiency: 1, by_width: {-128: 1e10}}\n" + rest +
                          "gpus_per_node: 1\n"),
            "x.yaml:1: `compute.by_width` key '-128' must be a positive model width, e.g. {128: 1.1e10, 512: 2.5e10}");
  EXPECT_EQ(profile_error("name: [a]\ncompute: {peak_flops: 3e10, efficiency: 1}\n" + rest + "gpus_per_node: 1\n"),
            "x.yaml:1: `name` must be a string");
  // 1e300 GPUs would not fit an int: converting it was undefined behaviour.
  EXPECT_EQ(profile_error("compute: {peak_flops: 3e10, efficiency: 1}\n" + rest + "gpus_per_node: 1e300\n"),
            "x.yaml: `gpus_per_node` must be a whole number of devices up to 4096, not 1e300");
  EXPECT_EQ(profile_error("compute: {peak_flops: 3e10, efficiency: 1}\n" + rest + "gpus_per_node: 2.5\n"),
            "x.yaml: `gpus_per_node` must be a whole number of devices up to 4096, not 2.5");
}

TEST(HardwareProfile, MeasuredRatesByWidthAreInterpolatedInLogWidth) {
  const HardwareProfile p = parse_profile(
      "name: x\ncompute: {peak_flops: 3e10, efficiency: 0.5, by_width: {512: 3e10, 128: 1e10}}\n"
      "memory: {bandwidth: 1e10, efficiency: 1, capacity: 1e9}\nkernel_overhead_s: 1e-6\ngpus_per_node: 1\n"
      "intra_node: {bandwidth: 1e9, latency_s: 1e-6}\ninter_node: {bandwidth: 1e9, latency_s: 1e-6}\n",
      "x.yaml");
  ASSERT_EQ(p.width_rates.size(), 2u);
  EXPECT_EQ(p.width_rates[0].first, 128.0);  // sorted
  // 256 is half-way from 128 to 512 in log2: (1e10 + 3e10)/2 = 2e10, × efficiency 0.5
  EXPECT_DOUBLE_EQ(p.flops_at(256), 1e10);
  EXPECT_DOUBLE_EQ(p.flops_at(64), 0.5e10);    // clamped below
  EXPECT_DOUBLE_EQ(p.flops_at(4096), 1.5e10);  // and above
  HardwareProfile flat = p;
  flat.width_rates.clear();
  EXPECT_DOUBLE_EQ(flat.flops_at(256), 1.5e10);  // peak × efficiency
}

TEST(HardwareProfile, AnUnknownKeyIsAnErrorNamingTheLineAndTheKeys) {
  // A misspelt key would otherwise leave its value at the default without a word.
  const std::string text =
      "name: x\ncompute: {peak_flops: 3e10, efficiency: 1}\nmemory: {bandwidth: 1e10, efficiency: 1, capacity: 1e9}\n"
      "kernel_overhead_s: 1e-6\ngraph_kernel_overhead: 1e-6\ngpus_per_node: 1\n"
      "intra_node: {bandwidth: 1e9, latency_s: 1e-6}\ninter_node: {bandwidth: 1e9, latency_s: 1e-6}\n";
  EXPECT_EQ(profile_error(text),
            "x.yaml:5: unknown key `graph_kernel_overhead` in a hardware profile; the keys are name, compute, memory, "
            "kernel_overhead_s, eager_op_s, train_op_s, graph_kernel_overhead_s, kernel_launch, gpus_per_node, "
            "intra_node, inter_node");
}

TEST(HardwareProfile, GraphKernelOverheadIsOptionalAndRoundTrips) {
  const std::string base =
      "name: x\ncompute: {peak_flops: 3e10, efficiency: 1}\nmemory: {bandwidth: 1e10, efficiency: 1, capacity: 1e9}\n"
      "kernel_overhead_s: 1e-5\ngpus_per_node: 1\n"
      "intra_node: {bandwidth: 1e9, latency_s: 1e-6}\ninter_node: {bandwidth: 1e9, latency_s: 1e-6}\n";
  EXPECT_EQ(parse_profile(base, "x.yaml").graph_kernel_overhead_s, 0.0);  // not given
  const HardwareProfile p = parse_profile(base + "graph_kernel_overhead_s: 2e-6\n", "x.yaml");
  EXPECT_EQ(p.graph_kernel_overhead_s, 2e-6);
  EXPECT_EQ(parse_profile(profile_yaml(p, "written"), "y.yaml").graph_kernel_overhead_s, 2e-6);
  EXPECT_EQ(profile_error(base + "graph_kernel_overhead_s: 0\n"),
            "x.yaml:8: `graph_kernel_overhead_s` must be positive, not 0");
  for (const char* gpu : {"a100-40gb", "a100-80gb", "h100-sxm", "h200", "h20"})
    EXPECT_GT(load_profile(gpu).graph_kernel_overhead_s, 0.0) << gpu;
}

TEST(HardwareProfile, PointToPointValuesAreOptionalRoundTripAndElseTheLinksOwnStandIn) {
  const std::string head =
      "name: x\ncompute: {peak_flops: 3e10, efficiency: 1}\nmemory: {bandwidth: 1e10, efficiency: 1, capacity: 1e9}\n"
      "kernel_overhead_s: 1e-5\ngpus_per_node: 1\ninter_node: {bandwidth: 1e9, latency_s: 1e-6}\n";
  const HardwareProfile p =
      parse_profile(head + "intra_node: {bandwidth: 1e9, latency_s: 1e-6, p2p_bandwidth: 4e9, p2p_latency_s: 3e-6}\n",
                    "x.yaml");
  EXPECT_EQ(p.intra_node.p2p().bandwidth, 4e9);
  EXPECT_EQ(p.intra_node.p2p().latency_s, 3e-6);
  EXPECT_EQ(p.inter_node.p2p().bandwidth, 1e9);  // not given: the collective's values
  EXPECT_EQ(p.inter_node.p2p().latency_s, 1e-6);
  const HardwareProfile again = parse_profile(profile_yaml(p, "written"), "y.yaml");
  EXPECT_EQ(again.intra_node.p2p_bandwidth, 4e9);
  EXPECT_EQ(again.intra_node.p2p_latency_s, 3e-6);
  EXPECT_EQ(again.inter_node.p2p_bandwidth, 0.0);
  EXPECT_EQ(profile_error(head + "intra_node: {bandwidth: 1e9, latency_s: 1e-6, p2p_bandwith: 4e9}\n"),
            "x.yaml:7: unknown key `intra_node.p2p_bandwith`; a link's keys are bandwidth, latency_s, p2p_bandwidth, "
            "p2p_latency_s");
  EXPECT_EQ(profile_error(head + "intra_node: {bandwidth: 1e9, latency_s: 1e-6, p2p_latency_s: -1}\n"),
            "x.yaml:7: `intra_node.p2p_latency_s` must be positive, not -1");
}

TEST(HardwareProfile, AnUnknownNameListsTheShippedOnes) {
  try {
    load_profile("a99");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hardware profile 'a99' is neither a file nor a shipped profile (a100-40gb"),
              std::string::npos) << e.what();
  }
}

// grpo_config's stage with the calculator, up to 3 calls a response, replies of up to 8 tokens.
config::PipelineConfig tools_config() {
  const std::string yaml =
      "run: {name: est, seed: 1, eval_sampling: {max_new_tokens: 32}}\n"
      "models:\n"
      "  policy: {init: {preset: tiny-2l}}\n"
      "rewards: {math: {type: verifiable}}\n"
      "tools: {calculator: {type: calculator}}\n"
      "data: {arith: {synthetic: {task: arithmetic, digits: 2, train: 64, eval: 8}}}\n"
      "stages:\n"
      "  - grpo: {policy: policy, reward: math, data: arith, iterations: 5, prompts: 8, group: 4, max_new_tokens: 32,"
      " tools: {use: [calculator], max_turns: 3, reply_tokens: 8}}\n";
  auto r = config::check_pipeline_text(yaml, "est.yaml", {}, {1, false});
  std::string errors;
  for (const auto& e : r.diagnostics.errors) errors += e.str() + "\n";
  EXPECT_TRUE(r.ok()) << errors;
  return std::move(r.config);
}

TEST(StageEstimate, AStageWithToolsIsCostedWithItsMostCallsAndTheGivenLatency) {
  const StageEstimate instant = estimate_pipeline(tools_config(), 1, profile(), {})[0];
  EXPECT_EQ(instant.tools.calls, 3.0);         // tools.max_turns: the most a response may make
  EXPECT_EQ(instant.tools.reply_tokens, 8.0);  // tools.reply_tokens
  EXPECT_EQ(instant.tools.seconds, 0.0);
  Shapes slow;
  slow.tools.seconds = 0.05;
  const StageEstimate waits = estimate_pipeline(tools_config(), 1, profile(), slow)[0];
  // Only the decode grows, by the calls' wait: 32 responses in 32 slots, each waiting 3 · 50 ms for its calls.
  ASSERT_EQ(waits.spans.size(), instant.spans.size());
  for (size_t i = 0; i < waits.spans.size(); ++i)
    if (waits.spans[i].name == "rollout/decode")
      EXPECT_NEAR(waits.spans[i].cost.seconds() - instant.spans[i].cost.seconds(), waits.tool_wait_s, 1e-9);
    else
      EXPECT_DOUBLE_EQ(waits.spans[i].cost.seconds(), instant.spans[i].cost.seconds()) << waits.spans[i].name;
  EXPECT_GE(waits.tool_wait_s, 0.15 - 1e-9);
  EXPECT_NE(estimate_text({waits}, profile()).find("tools: 3 calls a response of 0.05 s each"), std::string::npos);
}

}  // namespace
}  // namespace hpcrl::cost
