// forward_backward (algo/training/forward_backward.h) on one rank: the gradient a step
// accumulates does not depend on how its rows are cut into micro-batches, no
// micro-batches contribute no gradient, and the MoE aux-loss weights are each
// micro-batch's share of the rank's rows. Pipelined steps (pp > 1) against
// these are the pp end-to-end tests (tests/e2e/pp_e2e_test.cpp).
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "hpcrl/algo/training/forward_backward.h"
#include "reward_model_setup.h"
#include "token_rows.h"

namespace hpcrl::testing {
namespace {

// Rows of 6, 4, 9 and 3 tokens: prompt 2 tokens each, the rest response.
algo::TokenBatch four_rows() { return rows_of_lengths({6, 4, 9, 3}, /*stride=*/10); }

// The step's summed NLL gradient, with the batch's rows cut `micro_rows` at a time (0: one micro-batch).
std::vector<at::Tensor> nll_gradient(algo::Role& role, int64_t micro_rows) {
  config::TrainHparams hp;
  algo::Trainer trainer(role, hp, /*total_steps=*/1);
  const auto plan = algo::plan_micro_batches(four_rows(), {micro_rows, 0, false, 1});
  std::vector<algo::TokenBatch> shards;
  for (const auto& mb : plan) shards.push_back(mb.tokens);
  algo::forward_backward(role, trainer, shards, [&](size_t i, const at::Tensor& hidden) {
    return -(role.model->token_logprobs(hidden, shards[i].targets, false).logprobs * shards[i].loss_mask).sum();
  });
  std::vector<at::Tensor> grads;
  for (const auto& p : role.model->parameters()) {
    grads.push_back(p.grad().defined() ? p.grad().clone() : at::zeros_like(p));
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
  return grads;
}

TEST(ForwardBackward, MicroBatchingDoesNotChangeTheStepsGradient) {
  auto p = make_rm_pipeline(rm_pipeline_yaml("{init: {preset: tiny-2l}}", "{init: {preset: tiny-2l}, head: value}"));
  const auto whole = nll_gradient(p->policy(), 0);
  const auto in_pairs = nll_gradient(p->policy(), 2);
  const auto one_by_one = nll_gradient(p->policy(), 1);
  ASSERT_EQ(whole.size(), in_pairs.size());
  double largest = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    largest = std::max(largest, whole[i].abs().max().item<double>());
    // Sums of the same terms in another order: fp32 rounding only, measured
    // against the parameter's largest entry — an entry whose terms cancel to
    // near 0 keeps their absolute rounding, so an entry-relative bound fails
    // on it (the embedding: 2.9e-6 apart at an entry of 4.8, largest 8.4).
    // A micro-batch lost or counted twice moves entries by O(1) of the largest.
    const double scale = whole[i].abs().max().item<double>();
    EXPECT_LE((in_pairs[i] - whole[i]).abs().max().item<double>(), 1e-5 * scale) << "parameter " << i;
    EXPECT_LE((one_by_one[i] - whole[i]).abs().max().item<double>(), 1e-5 * scale) << "parameter " << i;
  }
  EXPECT_GT(largest, 0.0);  // the loss reached the parameters
}

TEST(ForwardBackward, NoMicroBatchesAddNoGradient) {
  auto p = make_rm_pipeline(rm_pipeline_yaml("{init: {preset: tiny-2l}}", "{init: {preset: tiny-2l}, head: value}"));
  algo::Role& role = p->policy();
  config::TrainHparams hp;
  algo::Trainer trainer(role, hp, 1);
  bool called = false;
  algo::forward_backward(role, trainer, {}, [&](size_t, const at::Tensor& h) {
    called = true;
    return h.sum();
  });
  EXPECT_FALSE(called);
  for (const auto& param : role.model->parameters())
    EXPECT_TRUE(!param.grad().defined() || param.grad().abs().max().item<double>() == 0.0);
}

TEST(ForwardBackward, AuxLossWeightIsTheMicroBatchsShareOfTheRanksRows) {
  // Micro-batches of rows [0, 3) and [3, 4) of a rank's 4 rows: 3/4 and 1/4.
  const auto plan = algo::plan_micro_batches(four_rows(), {3, 0, false, 1});
  EXPECT_EQ(algo::aux_loss_weights_by_rows(plan, 4), (std::vector<double>{0.75, 0.25}));
  // Rows planned one at a time: 1/4 each, summing to 1 (the aux loss is added once per step).
  const auto singles = algo::plan_micro_batches(four_rows(), {1, 0, false, 1});
  EXPECT_EQ(algo::aux_loss_weights_by_rows(singles, 4), (std::vector<double>{0.25, 0.25, 0.25, 0.25}));
}

}  // namespace
}  // namespace hpcrl::testing
