// Expert parallelism against the single-rank block, under mpirun -np 2 / 4.
// Every rank routes its own tokens. The identities asserted (fp32, 1e-5):
//   y_r, aux_r, dx_r             = single-rank block (all experts) on rank r's tokens;
//   grad(router), grad(shared)   = single-rank grads on rank r's tokens (replicated
//                                  params see only local tokens; the dp/grad
//                                  all-reduce happens elsewhere);
//   grad(expert e held by rank r) = Σ over the ep group's ranks s of the single-rank
//                                  grad on rank s's tokens (the combine's backward
//                                  brings every token's contribution to e's owner).
// The ep block is built from the same seed as the reference and its weights are
// checked equal, which also proves the initialisation is layout-independent.
#include <gtest/gtest.h>
#include <torch/utils.h>
#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <string>
#include <vector>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/model/moe_block.h"
#include "hpcrl/parallel/expert/all_to_all.h"
#include "hpcrl/util/error.h"
#include "model/test_models.h"

using hpcrl::ModelArch;
using hpcrl::model::MoeBlock;
using hpcrl::testing::test_arch;
using hpcrl::testing::TestArch;
namespace dist = hpcrl::dist;

namespace {

constexpr double kTol = 1e-5;

struct EpGroup {
  dist::CommPtr comm;
  std::vector<int> members;  // world ranks, in ep-rank order
};

// Consecutive world ranks form the ep groups (ep | world size); collective.
EpGroup ep_group(int ep) {
  dist::init(nullptr, nullptr);
  const int size = dist::world().size;
  EpGroup mine;
  for (int g = 0; g < size / ep; ++g) {
    std::vector<int> ranks;
    for (int i = 0; i < ep; ++i) ranks.push_back(g * ep + i);
    auto c = dist::new_group(ranks, "ep" + std::to_string(g));
    if (c) mine = {c, ranks};
  }
  return mine;
}

// The block of these tests: hidden size 8, experts of width 6, no shared
// expert, normalised top-k weights. Each test sets the number of experts and
// k, and a shared expert (width kSharedWidth) or un-normalised weights, by name.
TestArch block_arch(const std::string& family) {
  return test_arch()
      .family(family)
      .hidden_size(8)
      .moe_intermediate_size(6)
      .shared_expert_intermediate_size(0)
      .norm_topk_prob(true);
}

constexpr int64_t kSharedWidth = 5;  // shared_expert_intermediate_size of a block with a shared expert

struct Batch {
  at::Tensor x, upstream;  // [N, C]: tokens and the loss weights dL/dy
};

// World rank r's tokens; any rank can rebuild any other rank's batch.
Batch batch_of(int world_rank, int64_t hidden, int64_t tokens, bool skew) {
  at::Generator gen = at::detail::createCPUGenerator(1000 + world_rank);
  Batch b;
  b.x = at::randn({tokens, hidden}, gen);
  if (skew) b.x.select(1, 0).fill_(3.0);  // with a skewed router: everything to experts 0 and 1
  b.upstream = at::randn({tokens, hidden}, gen);
  return b;
}

void skew_router(MoeBlock& b) {
  torch::NoGradGuard g;
  b.gate->weight.zero_();
  b.gate->weight[0][0] = 5.0;
  b.gate->weight[1][0] = 4.0;
}

struct Result {
  at::Tensor y, aux, dx, counts;
  std::map<std::string, at::Tensor> grads;
};

constexpr double kAuxCoef = 0.7;

Result run(MoeBlock& block, const Batch& batch) {
  for (auto& p : block.parameters()) p.mutable_grad() = at::Tensor();
  at::Tensor x = batch.x.clone().requires_grad_(true);
  auto out = block.forward(x);
  ((out.y * batch.upstream).sum() + kAuxCoef * out.aux_loss).backward();
  Result r{out.y.detach(), out.aux_loss.detach(), x.grad(), out.expert_counts, {}};
  for (const auto& p : block.hf_parameters()) r.grads[p.name] = p.tensor.grad().clone();
  return r;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 && b.numel() == 0) return 0.0;
  return (a - b).abs().max().item<double>();
}

// `tokens(world_rank)` gives each rank's batch size.
void expect_matches_single_rank(int ep, const ModelArch& arch, bool skew, int64_t (*tokens)(int)) {
  EpGroup group = ep_group(ep);
  ASSERT_TRUE(group.comm);
  ASSERT_EQ(group.comm->size(), ep);
  hpcrl::parallel::ParallelContext ctx;
  ctx.ep = group.comm;

  torch::manual_seed(42);
  MoeBlock reference(arch, {});
  const at::Tensor next_after_reference = at::randn({4});
  torch::manual_seed(42);
  MoeBlock block(arch, ctx);
  // Building the block consumed the global generator exactly as the single-rank one did.
  ASSERT_TRUE(at::equal(at::randn({4}), next_after_reference));
  if (skew) {
    skew_router(reference);
    skew_router(block);
  }

  // This rank holds experts [r·L, (r+1)·L), with the reference's weights.
  const int64_t L = arch.num_experts / ep;
  ASSERT_EQ(static_cast<int64_t>(block.experts().size()), L);
  ASSERT_EQ(block.first_local_expert(), group.comm->rank() * L);
  std::map<std::string, at::Tensor> ref_params;
  for (const auto& p : reference.hf_parameters()) ref_params[p.name] = p.tensor;
  for (const auto& p : block.hf_parameters()) {
    ASSERT_TRUE(ref_params.count(p.name)) << p.name;
    ASSERT_TRUE(at::equal(p.tensor, ref_params[p.name])) << "initial weights differ: " << p.name;
    if (p.expert >= 0) ASSERT_TRUE(p.expert >= block.first_local_expert() && p.expert < block.first_local_expert() + L);
  }

  const int me = dist::world().rank;
  const Batch mine = batch_of(me, arch.hidden_size, tokens(me), skew);
  Result got = run(block, mine);

  Result want;
  std::map<std::string, at::Tensor> expert_grad_sum;
  for (int s : group.members) {
    Result r = run(reference, batch_of(s, arch.hidden_size, tokens(s), skew));
    for (const auto& p : reference.hf_parameters()) {
      if (p.expert < 0) continue;
      auto& acc = expert_grad_sum[p.name];
      acc = acc.defined() ? acc + r.grads[p.name] : r.grads[p.name];
    }
    if (s == me) want = r;
  }

  EXPECT_LT(max_diff(got.y, want.y), kTol);
  EXPECT_NEAR(got.aux.item<double>(), want.aux.item<double>(), kTol);
  EXPECT_LT(max_diff(got.dx, want.dx), kTol);
  EXPECT_TRUE(at::equal(got.counts, want.counts));
  int checked = 0;
  for (const auto& p : block.hf_parameters()) {
    const at::Tensor& expected = p.expert >= 0 ? expert_grad_sum.at(p.name) : want.grads.at(p.name);
    EXPECT_LT(max_diff(got.grads.at(p.name), expected), kTol) << p.name << " on world rank " << me;
    ++checked;
  }
  // Router, L experts × 3 projections, shared expert (3) and its gate.
  EXPECT_EQ(checked, 1 + 3 * L + (arch.shared_expert_intermediate_size > 0 ? 4 : 0));
}

int64_t uneven_tokens(int r) { return 3 + 2 * r; }
int64_t last_rank_empty(int r) { return r == dist::world().size - 1 ? 0 : 5 + r; }

int world_size() {
  dist::init(nullptr, nullptr);
  return dist::world().size;
}

}  // namespace

TEST(AllToAllRows, MovesRowsAndSendsGradientsBack) {
  const int size = world_size();
  EpGroup g = ep_group(size);
  const int me = g.comm->rank();
  // Rank r sends r + j + 1 rows to rank j; row i to j holds 1000 r + 10 j + i.
  std::vector<int64_t> send(size), recv(size);
  std::vector<at::Tensor> parts;
  for (int j = 0; j < size; ++j) {
    send[j] = me + j + 1;
    recv[j] = j + me + 1;
    parts.push_back(at::arange(send[j], at::kFloat) + 1000.0 * me + 10.0 * j);
  }
  at::Tensor rows = at::cat(parts).unsqueeze(1).repeat({1, 3}).requires_grad_(true);  // [R, 3]
  at::Tensor got = hpcrl::parallel::expert::all_to_all_rows(rows, g.comm, send, recv);
  std::vector<at::Tensor> expected;
  for (int j = 0; j < size; ++j) expected.push_back(at::arange(recv[j], at::kFloat) + 1000.0 * j + 10.0 * me);
  ASSERT_TRUE(at::equal(got, at::cat(expected).unsqueeze(1).repeat({1, 3})));
  // Receiver me weights rows from rank j by (me + 1) · (j + 1): the sender's
  // gradient for its rows to rank j must be (j + 1) · (me + 1) too.
  std::vector<at::Tensor> w;
  for (int j = 0; j < size; ++j) w.push_back(at::full({recv[j], 3}, double((me + 1) * (j + 1))));
  (got * at::cat(w)).sum().backward();
  std::vector<at::Tensor> want_grad;
  for (int j = 0; j < size; ++j) want_grad.push_back(at::full({send[j], 3}, double((j + 1) * (me + 1))));
  EXPECT_TRUE(at::equal(rows.grad(), at::cat(want_grad)));
}

TEST(ExpertParallel, Qwen2MoeWithSharedExpertFullWorld) {
  const ModelArch arch = block_arch("qwen2_moe")
                             .num_experts(8)
                             .experts_per_token(2)
                             .shared_expert_intermediate_size(kSharedWidth)
                             .norm_topk_prob(false)
                             .build();
  expect_matches_single_rank(world_size(), arch, /*skew=*/false, uneven_tokens);
}

TEST(ExpertParallel, MixtralOneExpertPerRank) {
  // L = 1: received rows are already expert-major (no local permutation).
  const int size = world_size();
  const ModelArch arch = block_arch("mixtral").num_experts(size).experts_per_token(2).build();
  expect_matches_single_rank(size, arch, /*skew=*/false, uneven_tokens);
}

TEST(ExpertParallel, Ep2Groups) {
  // On 4 ranks: two independent ep=2 groups {0,1} and {2,3}.
  const ModelArch arch =
      block_arch("qwen2_moe").num_experts(8).experts_per_token(3).shared_expert_intermediate_size(kSharedWidth).build();
  expect_matches_single_rank(2, arch, /*skew=*/false, uneven_tokens);
}

TEST(ExpertParallel, AllTokensToRankZerosExperts) {
  // Every token of every rank picks experts 0 and 1: all other experts get zero
  // rows and zero (but defined) gradients; splits to other ranks are 0.
  const ModelArch arch = block_arch("qwen2_moe").num_experts(8).experts_per_token(2).build();
  expect_matches_single_rank(world_size(), arch, /*skew=*/true, uneven_tokens);
}

TEST(ExpertParallel, RankWithoutTokens) {
  const ModelArch arch =
      block_arch("qwen2_moe").num_experts(8).experts_per_token(2).shared_expert_intermediate_size(kSharedWidth).build();
  expect_matches_single_rank(world_size(), arch, /*skew=*/false, last_rank_empty);
}

TEST(ExpertParallel, ExpertsNotDivisibleByEpIsAnInputError) {
  const int size = world_size();
  EpGroup g = ep_group(size);
  hpcrl::parallel::ParallelContext ctx;
  ctx.ep = g.comm;
  const ModelArch arch = block_arch("qwen2_moe").num_experts(size + 1).experts_per_token(2).build();
  try {
    MoeBlock b(arch, ctx);
    FAIL() << "expected InputError";
  } catch (const hpcrl::InputError& e) {
    const std::string want = "num_experts = " + std::to_string(size + 1) + " is not divisible by ep = " +
                             std::to_string(size) + ": choose an ep that divides the number of experts";
    EXPECT_EQ(std::string(e.what()), want);
  }
}
