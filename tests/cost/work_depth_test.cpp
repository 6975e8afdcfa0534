// The work–depth counts against hand-worked numbers for the tiny-2l preset
// (byte vocabulary V = 272, d = 128, d_ff = 384, L = 2, 4 query heads and 2
// k/v heads of 32: GQA), and the α–β collective costs.
#include <gtest/gtest.h>

#include "hpcrl/cost/comm_cost.h"
#include "hpcrl/cost/work_depth.h"

namespace hpcrl::cost {
namespace {

const ModelArch kTiny2l = model_arch_preset("tiny-2l");

TEST(WorkDepth, AttentionProjectionsCountGqaKeyValueHeads) {
  // q 128·128 + k,v 2·128·64 (2 heads of 32) + o 128·128 = 16384 + 16384 + 16384
  EXPECT_EQ(attention_projection_params(kTiny2l), 49152);
}

TEST(WorkDepth, GatedMlpHasThreeMatrices) {
  EXPECT_EQ(active_mlp_params(kTiny2l), 3 * 128 * 384);  // gate, up, down = 147456
}

TEST(WorkDepth, MoeCountsTheRouterTheTopKAndTheSharedExpert) {
  ModelArch a = kTiny2l;
  a.hidden_size = 64;
  a.num_experts = 8;
  a.experts_per_token = 2;
  a.moe_intermediate_size = 32;
  a.shared_expert_intermediate_size = 64;
  // router 64·8 + top-2 · 3·64·32 + shared 3·64·64 + its gate 64 = 512 + 12288 + 12288 + 64
  EXPECT_EQ(active_mlp_params(a), 25152);
}

TEST(WorkDepth, ForwardFlopsPerTokenIsKaplansCount) {
  // 2·L·(P_attn + P_mlp + m·h·d_head) + 2·V·d at m = 10:
  // 2·2·(49152 + 147456 + 1280) + 2·272·128 = 791552 + 69632
  EXPECT_DOUBLE_EQ(forward_flops_per_token(kTiny2l, 10), 861184.0);
  EXPECT_DOUBLE_EQ(forward_flops_per_token(kTiny2l, 10, /*lm_head=*/false), 791552.0);
}

TEST(WorkDepth, CausalPrefillUsesTheMeanContext) {
  // 3 tokens attend to 1, 2, 3 → mean 2: 3 · (4·(196608 + 256) + 69632) = 3 · 857088
  EXPECT_DOUBLE_EQ(sequence_forward_flops(kTiny2l, 3), 2571264.0);
  // Generation's prefill needs the logits of the last token only: 3 · 787456 + 69632
  EXPECT_DOUBLE_EQ(sequence_forward_flops(kTiny2l, 3, false), 2432000.0);
}

TEST(WorkDepth, DecodeStepCountsEachSequenceAtItsContextPlusItself) {
  // 4 sequences with 9 tokens before the new one: 4 · C_f(10)
  EXPECT_DOUBLE_EQ(decode_step_flops(kTiny2l, 4, 9), 4 * 861184.0);
}

TEST(WorkDepth, KvCacheBytes) {
  // 2 (K and V) · 10 tokens · 2 layers · 64 (2 k/v heads of 32) · 4 bytes
  EXPECT_DOUBLE_EQ(kv_cache_bytes(kTiny2l, 10, 4), 10240.0);
}

TEST(WorkDepth, TrainingIsThreeForwardsAndFourWithCheckpointing) {
  // 8 tokens of one 8-token sequence at mean context 4.5: C_f = 4·(196608 + 576) + 69632 = 858368
  EXPECT_DOUBLE_EQ(training_flops(kTiny2l, 8, 8, false), 3 * 8 * 858368.0);
  EXPECT_DOUBLE_EQ(training_flops(kTiny2l, 8, 8, true), 4 * 8 * 858368.0);
}

TEST(CommCost, RingAllReduceMovesTwiceTheShareAndPaysTwoLatenciesPerStep) {
  const Link link{1e9, 1e-5};
  // 2·3/4 · 1e6 / 1e9 + 2·3 · 1e-5 = 1.5e-3 + 6e-5
  EXPECT_DOUBLE_EQ(all_reduce_seconds(1e6, 4, link), 1.56e-3);
  EXPECT_DOUBLE_EQ(all_reduce_seconds(1e6, 1, link), 0.0);
  // (n−1)/n · bytes / β + (n−1)·α = 0.75e-3 + 3e-5
  EXPECT_DOUBLE_EQ(all_gather_seconds(1e6, 4, link), 0.78e-3);
  EXPECT_DOUBLE_EQ(send_seconds(1e6, link), 1.01e-3);
  // 1e-3 + ⌈log2 5⌉ = 3 latencies
  EXPECT_DOUBLE_EQ(broadcast_seconds(1e6, 5, link), 1.03e-3);
}

TEST(CommCost, AGroupCrossesNodesWhenItSpansMoreThanOneNodesRanks) {
  EXPECT_FALSE(crosses_nodes(4, 1, 4));  // tp = 4 inside a 4-GPU node
  EXPECT_TRUE(crosses_nodes(2, 4, 4));   // dp = 2 over tp = 4: ranks 0 and 4
  EXPECT_FALSE(crosses_nodes(1, 8, 4));  // a group of one crosses nothing
}

}  // namespace
}  // namespace hpcrl::cost
