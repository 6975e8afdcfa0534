// Micro-batch planning (algo/training/micro_batches.h): which rows go together under
// micro_batch / micro_batch_tokens, the trimmed and packed layouts, and the
// property packing rests on — a packed row gives every sequence exactly the
// log-probs it gets alone in its own row.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "../model/test_models.h"
#include "hpcrl/algo/objectives/loss_agg.h"
#include "hpcrl/algo/training/micro_batches.h"
#include "token_rows.h"

namespace hpcrl::algo {
namespace {

// Rows of total length 5, 3, 7, 2 (prompt 2 tokens each), right-padded to T = 7.
TokenBatch four_rows() { return testing::rows_of_lengths({5, 3, 7, 2}, /*stride=*/8); }

std::vector<std::pair<int64_t, int64_t>> ranges(const std::vector<MicroBatch>& plan) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& m : plan) out.emplace_back(m.begin, m.end);
  return out;
}

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

TEST(MicroBatches, RowAndTokenCapsCutConsecutiveRows) {
  TokenBatch b = four_rows();
  EXPECT_EQ(ranges(plan_micro_batches(b, {})), (Ranges{{0, 4}}));
  EXPECT_EQ(ranges(plan_micro_batches(b, {2, 0, false, 1})), (Ranges{{0, 2}, {2, 4}}));
  // Padded cost rows × longest ≤ 10: {5,3} = 2·5; {7} alone (7,2 would be 2·7); {2}.
  EXPECT_EQ(ranges(plan_micro_batches(b, {0, 10, false, 1})), (Ranges{{0, 2}, {2, 3}, {3, 4}}));
  // Packed cost Σ length ≤ 10: {5,3} = 8; {7,2} = 9.
  EXPECT_EQ(ranges(plan_micro_batches(b, {0, 10, true, 1})), (Ranges{{0, 2}, {2, 4}}));
  // A sequence longer than the budget runs alone rather than being dropped.
  EXPECT_EQ(ranges(plan_micro_batches(b, {0, 4, true, 1})), (Ranges{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  EXPECT_TRUE(plan_micro_batches(slice_rows(b, 0, 0), {}).empty());
}

TEST(MicroBatches, TrimmedRowsKeepTheirTokensAndDropTrailingPadding) {
  TokenBatch b = four_rows();
  auto plan = plan_micro_batches(b, {2, 0, false, 4});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].tokens.ids.sizes(), (at::IntArrayRef{2, 8}));  // longest 5, rounded up to 4·2
  EXPECT_TRUE(torch::equal(plan[0].tokens.ids.slice(1, 0, 5), b.ids.slice(0, 0, 2).slice(1, 0, 5)));
  EXPECT_FALSE(plan[0].tokens.packed());
  EXPECT_EQ(plan[1].tokens.ids.size(1), 8);  // longest 7
  EXPECT_TRUE(torch::equal(plan[1].tokens.loss_mask.slice(1, 0, 7), b.loss_mask.slice(0, 2, 4)));
}

TEST(MicroBatches, PackedRowsNumberSequencesAndRestartPositions) {
  TokenBatch b = four_rows();
  auto plan = plan_micro_batches(b, {0, 0, true, 1});  // capacity = the longest sequence, 7
  ASSERT_EQ(plan.size(), 1u);
  const TokenBatch& p = plan[0].tokens;
  ASSERT_TRUE(p.packed());
  // First fit in order: [5, 2] [3] [7].
  ASSERT_EQ(p.ids.sizes(), (at::IntArrayRef{3, 7}));
  EXPECT_TRUE(torch::equal(p.attention_mask[0], torch::tensor({1, 1, 1, 1, 1, 2, 2}, torch::kLong)));
  EXPECT_TRUE(torch::equal(p.positions[0], torch::tensor({0, 1, 2, 3, 4, 0, 1}, torch::kLong)));
  EXPECT_TRUE(torch::equal(p.attention_mask[1], torch::tensor({1, 1, 1, 0, 0, 0, 0}, torch::kLong)));
  EXPECT_TRUE(torch::equal(p.ids[0].slice(0, 5, 7), b.ids[3].slice(0, 0, 2)));
  // Loss tokens are the same tokens, and come back to their rows.
  EXPECT_EQ(p.loss_mask.sum().item<float>(), b.loss_mask.sum().item<float>());
  at::Tensor values = at::arange(28, at::kFloat).view({4, 7}) * b.attention_mask.to(at::kFloat);
  EXPECT_TRUE(torch::equal(plan[0].scatter(plan[0].gather(values), 7), values));
  // Padding sits only at the ends of rows: 5+2, 3, 7 tokens in 3 rows of 7.
  EXPECT_EQ((p.attention_mask == 0).sum().item<int64_t>(), 4);
}

// The property packing rests on: a sequence's log-probs do not depend on what shares its row.
TEST(MicroBatches, PackedLogProbsEqualEachSequenceAlone) {
  model::ModelOptions opts;
  opts.seed = 5;
  model::DecoderModel m(testing::tiny_arch("qwen3", true), parallel::ParallelContext{}, opts);
  torch::NoGradGuard no_grad;
  TokenBatch b = four_rows();
  at::Tensor alone = at::zeros({4, 7});
  for (int64_t i = 0; i < 4; ++i) {
    const int64_t n = b.prompt_lens[i] + b.response_lens[i];
    TokenBatch row = slice_rows(b, i, i + 1);
    auto out = m.forward(row.ids.slice(1, 0, n));
    alone[i].slice(0, 0, n) = m.token_logprobs(out.hidden, row.targets.slice(1, 0, n), false).logprobs[0];
  }
  for (MicroBatchOptions o : {MicroBatchOptions{0, 0, true, 1}, MicroBatchOptions{0, 9, true, 1},
                              MicroBatchOptions{0, 16, true, 4}, MicroBatchOptions{3, 0, false, 2}}) {
    at::Tensor got = at::zeros({4, 7});
    for (const MicroBatch& mb : plan_micro_batches(b, o)) {
      auto out = forward_tokens(m, mb.tokens);
      at::Tensor lp = m.token_logprobs(out.hidden, mb.tokens.targets, false).logprobs;
      got.slice(0, mb.begin, mb.end) = mb.scatter(lp, 7);
    }
    at::Tensor real = b.attention_mask.to(at::kFloat);
    EXPECT_LT(((got - alone) * real).abs().max().item<float>(), 1e-5)
        << "max_rows " << o.max_rows << ", max_tokens " << o.max_tokens << ", pack " << o.pack;
  }
}

TEST(MicroBatches, LossWeightsGiveTheAggregateNumerator) {
  at::Tensor v = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}).view({2, 3});
  at::Tensor m = torch::tensor({1.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f}).view({2, 3});
  EXPECT_FLOAT_EQ((v * loss_weights(m, LossAgg::token_mean)).sum().item<float>(), 7.0f);         // 1 + 2 + 4
  EXPECT_FLOAT_EQ((v * loss_weights(m, LossAgg::seq_mean_token_sum)).sum().item<float>(), 7.0f);   // (1 + 2) + 4
  EXPECT_FLOAT_EQ((v * loss_weights(m, LossAgg::seq_mean_token_mean)).sum().item<float>(), 5.5f);  // 1.5 + 4
  // Cut the columns in two (sequence parallelism): the weights, taken on whole rows, still add up.
  at::Tensor w = loss_weights(m, LossAgg::seq_mean_token_mean);
  const float halves = (v.slice(1, 0, 2) * w.slice(1, 0, 2)).sum().item<float>() +
                       (v.slice(1, 2, 3) * w.slice(1, 2, 3)).sum().item<float>();
  EXPECT_FLOAT_EQ(halves, 5.5f);
}

}  // namespace
}  // namespace hpcrl::algo
