// The rollout engine and weight sync across ranks (mpirun -np 2):
//   - generation with the model split tp=2 equals tp=1 (docs/rollout.md), for the
//     stories260k fixture (in float64) and a Qwen2-shaped model whose KV heads
//     split (fp32);
//   - an MoE model split ep=2, where the two ranks generate for different
//     prompts and finish at different times (idle ranks step along), equals
//     ep=1 on each rank's own prompts;
//   - resharding tp=2 training weights into a tp=1 generation model gives that
//     model exactly the trained weights and the same generations, and the
//     trace records a "weight_sync" span with the bytes;
//   - disaggregated: a broadcast over a bridge communicator gives the rollout
//     rank the training rank's weights.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include <filesystem>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/weight_sync.h"
#include "hpcrl/trace/reader.h"
#include "hpcrl/trace/trace.h"
#include "model/mpi_layout.h"
#include "rollout/rollout_testing.h"
#include "rollout/scripted_turns.h"

namespace {

using namespace hpcrl;
using hpcrl::testing::same_generation;

bool two_ranks() { return dist::init(nullptr, nullptr).size == 2; }

rollout::SamplingParams params(double temperature, int64_t max_new, uint64_t seed, std::vector<int32_t> eos = {}) {
  rollout::SamplingParams p;
  p.temperature = temperature;
  p.top_p = 0.9;
  p.max_new_tokens = max_new;
  p.seed = seed;
  p.eos_ids = std::move(eos);
  return p;
}

// Tolerances as in engine_test.cpp: docs/rollout.md's 1e-5 in fp32 for the random
// models; stories260k (fp32 noise floor above 1e-5, see there) in float64.
constexpr double kFp32 = 1e-5, kFloat64 = 5e-6;

void expect_same_as_single_rank(std::shared_ptr<model::DecoderModel> split, std::shared_ptr<model::DecoderModel> one,
                                const std::vector<std::vector<int32_t>>& prompts, const rollout::SamplingParams& p,
                                double tol = kFp32, const rollout::EngineOptions& options = {3, true}) {
  rollout::Engine a(split, nullptr, options), b(one, nullptr, options);
  auto got = a.generate(prompts, 2, p);
  auto want = b.generate(prompts, 2, p);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(same_generation(*one, prompts[want[i].prompt_index], want[i], got[i], tol)) << "sequence " << i;
}

TEST(RolloutMpi, TensorParallelGenerationEqualsSingleRank) {
  if (!two_ranks()) GTEST_SKIP() << "layout test written for 2 ranks";
  auto ctx = hpcrl::testing::layout_context(2, 1);
  auto prompts = hpcrl::testing::random_prompts({4, 17, 9, 2}, 512, 12);
  for (auto& q : prompts) q[0] = 1;
  auto split = hpcrl::testing::stories(ctx), one = hpcrl::testing::stories();
  split->to(at::kDouble);
  one->to(at::kDouble);
  expect_same_as_single_rank(split, one, prompts, params(0, 24, 1, {2}), kFloat64);
  expect_same_as_single_rank(split, one, prompts, params(1.0, 24, 2, {2}), kFloat64);

  auto full = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  auto qwen = hpcrl::testing::in_layout(*full, ctx);
  auto qprompts = hpcrl::testing::random_prompts({6, 20, 3}, 96, 13);
  expect_same_as_single_rank(qwen, full, qprompts, params(0, 20, 3));
  expect_same_as_single_rank(qwen, full, qprompts, params(1.0, 20, 4));
}

TEST(RolloutMpi, TensorParallelFixedShapeStepsEqualTheSingleRankDynamicSteps) {
  // The fixed step (engine.h, DecodeStep::fixed) on tp = 2, its logits
  // gathered over tp inside the step, against one rank's dynamic steps; 3
  // prompts x 2 samples in 4 slots, so the 6 rows pass through buckets 4 and 2.
  if (!two_ranks()) GTEST_SKIP() << "layout test written for 2 ranks";
  auto ctx = hpcrl::testing::layout_context(2, 1);
  auto full = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  auto qwen = hpcrl::testing::in_layout(*full, ctx);
  const auto prompts = hpcrl::testing::random_prompts({6, 20, 3}, 96, 13);
  rollout::EngineOptions fixed{4, true};
  fixed.decode_step = rollout::DecodeStep::fixed;
  for (const auto& p : {params(0, 20, 3, {7}), params(1.0, 20, 4, {7})}) {
    rollout::Engine a(qwen, nullptr, fixed), b(full, nullptr, {4, true});
    const auto got = a.generate(prompts, 2, p), want = b.generate(prompts, 2, p);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(same_generation(*full, prompts[size_t(want[i].prompt_index)], want[i], got[i], kFp32))
          << "temperature " << p.temperature << ", sequence " << i;
  }
}

TEST(RolloutMpi, TensorParallelMultiTurnGenerationEqualsSingleRankWhenRepliesArriveAtDifferentTimes) {
  // The tp ranks' replies come back at different polls (rank 0 at once, rank 1
  // four polls later): the ranks take a reply once both have it, so they
  // prefill it in the same iteration, and every trajectory equals the single
  // rank's (which gets its replies at once).
  if (!two_ranks()) GTEST_SKIP() << "layout test written for 2 ranks";
  auto ctx = hpcrl::testing::layout_context(2, 1);
  auto full = hpcrl::testing::random_model(hpcrl::testing::qwen2_arch());
  auto split = hpcrl::testing::in_layout(*full, ctx);
  const auto prompts = hpcrl::testing::random_prompts({6, 20, 3}, 96, 13);
  const rollout::SamplingParams p = params(1.0, 30, 5, {5, 11});
  auto run = [&](std::shared_ptr<model::DecoderModel> m, int64_t delay) {
    hpcrl::testing::ScriptedTurns turns(delay);
    rollout::GenerationCall call;
    for (int64_t q = 0; q < 3; ++q)
      for (int64_t i = 0; i < 2; ++i) call.samples.push_back({q, i});
    call.turns = &turns;
    return rollout::Engine(m, nullptr, {3, true}).run(prompts, call, p).finished;
  };
  const auto got = run(split, dist::init(nullptr, nullptr).rank == 0 ? 0 : 4);
  const auto want = run(full, 0);
  ASSERT_EQ(got.size(), want.size());
  int64_t turns = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].sampled, want[k].sampled) << "sequence " << k;
    EXPECT_TRUE(same_generation(*full, prompts[size_t(want[k].prompt_index)], want[k], got[k], 2e-5)) << "sequence " << k;
    turns += want[k].turns;
  }
  EXPECT_GT(turns, 1);
}

// An MoE model, whole and split over an ep group of ranks 0 and 1, and each
// rank's prompts: rank 0 three prompts, rank 1 one (so the ranks' work differs).
struct ExpertParallelPair {
  std::shared_ptr<model::DecoderModel> full, split;
  std::vector<std::vector<int32_t>> prompts;
};
ExpertParallelPair expert_parallel_pair() {
  const int rank = dist::init(nullptr, nullptr).rank;
  ExpertParallelPair ep;
  ep.full = hpcrl::testing::random_model(hpcrl::testing::moe_arch());
  parallel::ParallelContext ctx;
  ctx.ep = dist::new_group({0, 1}, "test/ep");
  ep.split = hpcrl::testing::in_layout(*ep.full, ctx);
  ep.prompts = rank == 0 ? hpcrl::testing::random_prompts({5, 12, 3}, 96, 40)
                         : hpcrl::testing::random_prompts({8}, 96, 41);
  return ep;
}

TEST(RolloutMpi, ExpertParallelRanksWithDifferentWorkStepTogether) {
  if (!two_ranks()) GTEST_SKIP() << "layout test written for 2 ranks";
  const int rank = dist::init(nullptr, nullptr).rank;
  const ExpertParallelPair ep = expert_parallel_pair();
  const auto& prompts = ep.prompts;
  auto p = params(1.0, rank == 0 ? 24 : 6, 5);
  expect_same_as_single_rank(ep.split, ep.full, prompts, p);
  // A rank without any prompt still takes part in its partner's steps.
  auto q = params(0, 10, 6);
  rollout::Engine engine(ep.split, nullptr, {4, true});
  auto out = engine.generate(rank == 0 ? prompts : std::vector<std::vector<int32_t>>{}, 1, q);
  EXPECT_EQ(out.size(), rank == 0 ? prompts.size() : 0u);
}

TEST(RolloutMpi, ExpertParallelMultiTurnRanksPrefillTheirOwnRepliesInStep) {
  // ep = 2 over an MoE model: rank 0 has three prompts with replies 3 polls late, rank 1 one prompt
  // with replies at once, so the ranks park, wait and prefill replies at different iterations; each
  // pads to the other's forward count. Every trajectory equals the whole model's on one rank.
  if (!two_ranks()) GTEST_SKIP() << "layout test written for 2 ranks";
  const int rank = dist::init(nullptr, nullptr).rank;
  const ExpertParallelPair ep = expert_parallel_pair();
  const rollout::SamplingParams p = params(1.0, rank == 0 ? 28 : 20, 9, {5, 11});
  auto run = [&](std::shared_ptr<model::DecoderModel> m, int64_t delay) {
    hpcrl::testing::ScriptedTurns turns(delay);
    return rollout::Engine(m, nullptr, {3, true})
        .run(ep.prompts, rollout::GenerationCall::fresh(int64_t(ep.prompts.size()), 2, &turns), p)
        .finished;
  };
  const auto got = run(ep.split, rank == 0 ? 3 : 0);
  const auto want = run(ep.full, 0);
  ASSERT_EQ(got.size(), want.size());
  int64_t turns = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_EQ(got[k].sampled, want[k].sampled) << "sequence " << k;
    EXPECT_TRUE(same_generation(*ep.full, ep.prompts[size_t(want[k].prompt_index)], want[k], got[k], 2e-5))
        << "sequence " << k;
    turns += want[k].turns;
  }
  EXPECT_GT(turns, 0) << "rank " << rank << " made no call: nothing was checked";
}

TEST(RolloutMpi, ExpertParallelRanksWhereOneCallIsMultiTurnAreAnInputError) {
  if (!two_ranks()) GTEST_SKIP() << "layout test written for 2 ranks";
  const int rank = dist::init(nullptr, nullptr).rank;
  const ExpertParallelPair ep = expert_parallel_pair();
  hpcrl::testing::ScriptedTurns turns(0);
  rollout::GenerationCall call = rollout::GenerationCall::fresh(int64_t(ep.prompts.size()), 1, rank == 0 ? &turns : nullptr);
  const std::string message = hpcrl::testing::input_error_of(
      [&] { rollout::Engine(ep.split, nullptr, {3, true}).run(ep.prompts, call, params(1.0, 8, 3)); });
  EXPECT_NE(message.find("every rank's call must pass a turn handler, or none"), std::string::npos) << message;
}

TEST(RolloutMpi, ExpertParallelRanksPrefillingInDifferentChunkCountsStepTogether) {
  if (!two_ranks()) GTEST_SKIP() << "layout test written for 2 ranks";
  const int rank = dist::init(nullptr, nullptr).rank;
  const ExpertParallelPair ep = expert_parallel_pair();
  // 150 attention scores per prefill forward (4 heads): rank 0 prefills its
  // 5- and 12-token prompts in 12 one-position chunks, rank 1 its 8-token
  // prompt in 2 chunks of 4, and runs 10 idle forwards beside rank 0's rest.
  // Reading the tokens every 4 steps, the ranks also retire at other steps.
  const auto& prompts = ep.prompts;
  rollout::EngineOptions options{3, true};
  options.prefill_attention_elements = 150;
  options.host_sync_interval = 4;
  expect_same_as_single_rank(ep.split, ep.full, prompts, params(1.0, rank == 0 ? 20 : 6, 7), kFp32, options);
}

// Training-side weights after "training": the seeded model, scaled per tensor.
void train_a_little(model::DecoderModel& m) {
  torch::NoGradGuard no_grad;
  for (auto& p : m.parameters()) p.mul_(1.5).add_(0.01);
}

int64_t full_bytes(model::DecoderModel& single_rank) {
  int64_t b = 0;
  for (auto& p : single_rank.parameters()) b += p.numel() * int64_t(p.element_size());
  return b;
}

void expect_same_weights(model::DecoderModel& a, model::DecoderModel& b) {
  auto wa = model::gather_full_weights(a), wb = model::gather_full_weights(b);
  ASSERT_EQ(wa.size(), wb.size());
  std::map<std::string, at::Tensor> byname(wb.begin(), wb.end());
  for (auto& [name, t] : wa) EXPECT_TRUE(at::equal(t, byname.at(name))) << name;
}

TEST(RolloutMpi, AReleasedGenerationCopyHoldsNoWeightsAndReshardsBackExactly) {
  if (!two_ranks()) GTEST_SKIP() << "layout test written for 2 ranks";
  const auto arch = hpcrl::testing::qwen2_arch();
  model::ModelOptions o;
  o.seed = 7;
  auto train = std::make_shared<model::DecoderModel>(arch, hpcrl::testing::layout_context(2, 1), o);
  train_a_little(*train);
  o.seed = 99;
  auto gen = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, o);
  rollout::reshard_weights(*train, *gen);
  rollout::ReleasedWeights released;
  released.release(*gen);  // between rollouts: the update may use the memory
  int64_t held = 0;
  for (const auto& p : gen->parameters()) held += p.numel();
  EXPECT_EQ(held, 0);
  EXPECT_TRUE(released.released());
  released.restore(*gen);
  rollout::reshard_weights(*train, *gen);  // the next rollout's sync fills it again
  o.seed = 7;
  auto expected = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, o);
  train_a_little(*expected);
  expect_same_weights(*gen, *expected);
}

TEST(RolloutMpi, ReshardFromTrainingTp2ToGenerationTp1) {
  if (!two_ranks()) GTEST_SKIP() << "layout test written for 2 ranks";
  const int rank = dist::init(nullptr, nullptr).rank;
  const auto arch = hpcrl::testing::qwen2_arch();
  model::ModelOptions o;
  o.seed = 7;
  auto train = std::make_shared<model::DecoderModel>(arch, hpcrl::testing::layout_context(2, 1), o);
  train_a_little(*train);
  o.seed = 99;  // the generation model starts from other weights
  auto gen = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, o);

  const std::string dir =
      (std::filesystem::temp_directory_path() / ("hpcrl-rollout-sync-trace-" + std::to_string(rank))).string();
  trace::start(dir, rank);
  const std::string trace_file = trace::file_path();
  rollout::WeightSyncStats st = rollout::reshard_weights(*train, *gen);
  trace::stop();

  // What tp=1 training from the same seed would hold.
  o.seed = 7;
  auto expected = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, o);
  train_a_little(*expected);
  expect_same_weights(*gen, *expected);
  EXPECT_EQ(st.bytes, full_bytes(*expected));
  EXPECT_GT(st.seconds, 0);

  auto events = trace::read_trace_file(trace_file).events;
  bool found = false;
  for (const auto& e : events)
    if (e.name == "weight_sync")
      for (const auto& [k, v] : e.args) found |= k == "bytes" && v == double(st.bytes);
  EXPECT_TRUE(found) << "no weight_sync span with the bytes in the trace";

  train->eval();
  gen->eval();
  expect_same_as_single_rank(train, gen, hpcrl::testing::random_prompts({5, 11}, 96, 3), params(1.0, 12, 8));
  std::filesystem::remove_all(dir);
}

TEST(RolloutMpi, BroadcastOverABridgeToTheRolloutRank) {
  if (!two_ranks()) GTEST_SKIP() << "layout test written for 2 ranks";
  const int rank = dist::init(nullptr, nullptr).rank;
  const auto arch = hpcrl::testing::qwen2_arch();
  // Rank 0 trains (tp=1), rank 1 generates; the bridge holds both, source first.
  dist::CommPtr bridge = dist::new_group({0, 1}, "policy->policy.rollout");
  ASSERT_TRUE(bridge);
  model::ModelOptions o;
  o.seed = 7;
  if (rank == 0) {
    auto train = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, o);
    train_a_little(*train);
    io::NamedTensors full = model::gather_full_weights(*train);
    auto st = rollout::broadcast_weights(*bridge, 0, &full, nullptr);
    EXPECT_EQ(st.bytes, full_bytes(*train));
  } else {
    o.seed = 99;
    auto gen = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, o);
    auto st = rollout::broadcast_weights(*bridge, 0, nullptr, gen.get());
    o.seed = 7;
    auto expected = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, o);
    train_a_little(*expected);
    expect_same_weights(*gen, *expected);
    EXPECT_EQ(st.bytes, full_bytes(*expected));
  }
}

}  // namespace
