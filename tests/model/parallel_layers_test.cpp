// Each tensor- and sequence-parallel building block against the same
// computation on one rank (every rank computes the full reference itself):
// column→row linear pair, vocab-parallel embedding, vocab-parallel log-probs
// and entropy (values and gradients, without gathering logits), the gather/
// scatter pair, replicated-chunk gradient sums, and the Ulysses exchanges.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "hpcrl/parallel/sequence/ulysses.h"
#include "hpcrl/parallel/tensor/comm_ops.h"
#include "hpcrl/parallel/tensor/linear.h"
#include "hpcrl/parallel/tensor/vocab_embedding.h"
#include "hpcrl/parallel/tensor/vocab_logprobs.h"
#include "mpi_layout.h"

namespace hpcrl::parallel {
namespace {

at::Tensor seeded_randn(std::vector<int64_t> shape, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return at::randn(shape, gen);
}

void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what, double tol = 1e-5) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_LE((got - want).abs().max().item<double>(), tol) << what;
}

class TensorParallel : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!hpcrl::testing::world_fits(GetParam())) GTEST_SKIP() << "needs a multiple of " << GetParam() << " ranks";
    ctx_ = hpcrl::testing::layout_context(GetParam(), 1);
  }
  ParallelContext ctx_;
};

TEST_P(TensorParallel, ColumnThenRowLinearMatchesFullMlp) {
  const int64_t C = 8, I = 16;
  at::Tensor w1 = seeded_randn({I, C}, 1), b1 = seeded_randn({I}, 2), w2 = seeded_randn({C, I}, 3);
  at::Tensor x0 = seeded_randn({3, C}, 4), upstream = seeded_randn({3, C}, 5);

  at::Tensor w1r = w1.clone().requires_grad_(), b1r = b1.clone().requires_grad_(), w2r = w2.clone().requires_grad_();
  at::Tensor xr = x0.clone().requires_grad_();
  at::Tensor yr = at::linear(at::gelu(at::linear(xr, w1r, b1r)), w2r);
  (yr * upstream).sum().backward();

  tensor::ColumnParallelLinear col(C, I, true, ctx_.tp);
  tensor::RowParallelLinear row(I, C, false, ctx_.tp);
  {
    torch::NoGradGuard ng;
    col.weight.copy_(col.shard_specs()["weight"].slice(w1));
    col.bias.copy_(col.shard_specs()["bias"].slice(b1));
    row.weight.copy_(row.shard_specs()["weight"].slice(w2));
  }
  at::Tensor x = x0.clone().requires_grad_();
  at::Tensor y = row.forward(at::gelu(col.forward(x)));
  (y * upstream).sum().backward();
  expect_close(y, yr, "output");
  expect_close(x.grad(), xr.grad(), "input grad");
  expect_close(col.weight.grad(), col.shard_specs()["weight"].slice(w1r.grad()), "column weight grad");
  expect_close(col.bias.grad(), col.shard_specs()["bias"].slice(b1r.grad()), "column bias grad");
  expect_close(row.weight.grad(), row.shard_specs()["weight"].slice(w2r.grad()), "row weight grad");
}

TEST_P(TensorParallel, ReplicatedChunksGetTheSummedGradient) {
  // A column layer cut into 1 chunk for all tp ranks: every rank holds the whole
  // weight but sees only its share of the upstream gradient (1/tp here).
  const int64_t C = 4, O = 6;
  at::Tensor w = seeded_randn({O, C}, 6), x0 = seeded_randn({2, C}, 7), upstream = seeded_randn({2, O}, 8);
  at::Tensor wr = w.clone().requires_grad_();
  (at::linear(x0, wr) * upstream).sum().backward();
  tensor::ColumnParallelLinear col(C, O, false, ctx_.tp, /*chunks=*/1);
  {
    torch::NoGradGuard ng;
    col.weight.copy_(w);
  }
  (col.forward(x0) * upstream / static_cast<double>(ctx_.tp_size())).sum().backward();
  expect_close(col.weight.grad(), wr.grad(), "replica gradient");
}

TEST_P(TensorParallel, VocabEmbeddingMatchesFullLookup) {
  const int64_t V = 16, C = 4;
  at::Tensor table = seeded_randn({V, C}, 9), upstream = seeded_randn({2, 5, C}, 10);
  at::Tensor ids = at::randint(V, {2, 5}, at::detail::createCPUGenerator(11), at::kLong);
  at::Tensor tr = table.clone().requires_grad_();
  at::Tensor yr = at::embedding(tr, ids);
  (yr * upstream).sum().backward();
  tensor::VocabParallelEmbedding emb(V, C, ctx_.tp);
  {
    torch::NoGradGuard ng;
    emb.weight.copy_(emb.shard_specs()["weight"].slice(table));
  }
  at::Tensor y = emb.forward(ids);
  (y * upstream).sum().backward();
  expect_close(y, yr, "embedding");
  expect_close(emb.weight.grad(), emb.shard_specs()["weight"].slice(tr.grad()), "embedding grad");
}

TEST_P(TensorParallel, VocabParallelLogprobsMatchFullSoftmax) {
  const int64_t V = 24, B = 2, T = 5;
  at::Tensor logits = seeded_randn({B, T, V}, 12) * 3, g_lp = seeded_randn({B, T}, 13), g_h = seeded_randn({B, T}, 14);
  at::Tensor targets = at::randint(V, {B, T}, at::detail::createCPUGenerator(15), at::kLong);
  at::Tensor lr = logits.clone().requires_grad_();
  at::Tensor logp = at::log_softmax(lr, -1);
  at::Tensor lp_ref = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1);
  at::Tensor h_ref = -(logp.exp() * logp).sum(-1);
  ((lp_ref * g_lp).sum() + (h_ref * g_h).sum()).backward();

  const int64_t local = V / ctx_.tp_size(), start = ctx_.tp_rank() * local;
  at::Tensor mine = logits.narrow(-1, start, local).clone().requires_grad_();
  auto out = tensor::vocab_parallel_logprobs(mine, targets, ctx_.tp, start);
  ((out.logprobs * g_lp).sum() + (out.entropy * g_h).sum()).backward();
  expect_close(out.logprobs, lp_ref, "log-probs");
  expect_close(out.entropy, h_ref, "entropy");
  expect_close(mine.grad(), lr.grad().narrow(-1, start, local), "logit grads");
  // Without entropy: same log-probs, entropy left out.
  auto lp_only = tensor::vocab_parallel_logprobs(mine, targets, ctx_.tp, start, false);
  EXPECT_FALSE(lp_only.entropy.defined());
  expect_close(lp_only.logprobs, lp_ref, "log-probs without entropy");
}

TEST_P(TensorParallel, GatherAndScatterAreConjugate) {
  at::Tensor full = seeded_randn({3, 4 * ctx_.tp_size()}, 16), upstream = seeded_randn({3, 4 * ctx_.tp_size()}, 17);
  at::Tensor mine = tensor::scatter_to_tp(full, ctx_.tp).clone().requires_grad_();
  expect_close(mine, full.narrow(1, 4 * ctx_.tp_rank(), 4), "scatter");
  at::Tensor back = tensor::gather_from_tp(mine, ctx_.tp);
  expect_close(back, full, "gather");
  (back * upstream).sum().backward();
  expect_close(mine.grad(), upstream.narrow(1, 4 * ctx_.tp_rank(), 4), "gather backward keeps own chunk");
}

INSTANTIATE_TEST_SUITE_P(Tp, TensorParallel, ::testing::Values(2, 4), [](const auto& info) {
  return "tp" + std::to_string(info.param);
});

class SequenceParallel : public ::testing::TestWithParam<int> {};

TEST_P(SequenceParallel, UlyssesExchangesMatchFullTensorSlices) {
  const int sp = GetParam();
  if (!hpcrl::testing::world_fits(sp)) GTEST_SKIP() << "needs a multiple of " << sp << " ranks";
  ParallelContext ctx = hpcrl::testing::layout_context(1, sp);
  const int64_t B = 2, T = 4 * sp, H = 2 * sp, D = 3;
  at::Tensor full = seeded_randn({B, T, H, D}, 18), upstream = seeded_randn({B, T, H, D}, 19);
  const int r = ctx.sp_rank();
  at::Tensor mine = sequence::sequence_chunk(full, ctx.sp).clone().requires_grad_();  // [B, T/sp, H, D]
  at::Tensor heads = sequence::seq_to_heads(mine, ctx.sp);                             // [B, T, H/sp, D]
  expect_close(heads, full.narrow(2, r * (H / sp), H / sp), "seq_to_heads", 0);
  at::Tensor back = sequence::heads_to_seq(heads * 2, ctx.sp);
  expect_close(back, mine * 2, "heads_to_seq", 0);
  (heads * upstream.narrow(2, r * (H / sp), H / sp)).sum().backward();
  // d/d(mine) of Σ heads·u: the upstream of my tokens, all heads.
  expect_close(mine.grad(), sequence::sequence_chunk(upstream, ctx.sp), "backward", 0);
  expect_close(sequence::gather_sequence(mine.detach(), ctx.sp), full, "gather_sequence", 0);
}

INSTANTIATE_TEST_SUITE_P(Sp, SequenceParallel, ::testing::Values(2, 4), [](const auto& info) {
  return "sp" + std::to_string(info.param);
});

}  // namespace
}  // namespace hpcrl::parallel
