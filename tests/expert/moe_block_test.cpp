// MoeBlock on one rank: every token's output is the weighted sum of its k
// experts computed directly (dropless), the shared expert's sigmoid gate, the
// HF parameter names of both families, and gradients against finite differences.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "hpcrl/model/moe_block.h"
#include "hpcrl/util/error.h"
#include "model/test_models.h"

using hpcrl::ModelArch;
using hpcrl::model::MoeBlock;
using hpcrl::testing::test_arch;
using hpcrl::testing::TestArch;

namespace {

// The block of these tests: hidden size 8, 4 experts of width 6, top-2,
// normalised top-k weights, no shared expert; a test that wants a shared
// expert (width kSharedWidth) or un-normalised weights sets it by name.
TestArch moe_arch(const std::string& family) {
  return test_arch()
      .family(family)
      .hidden_size(8)
      .num_experts(4)
      .experts_per_token(2)
      .moe_intermediate_size(6)
      .shared_expert_intermediate_size(0)
      .norm_topk_prob(true);
}

constexpr int64_t kSharedWidth = 5;  // shared_expert_intermediate_size of a block with a shared expert

// y_n = Σ_{e in top-k(n)} w_ne · expert_e(x_n) [+ sigmoid(g·x_n) · shared(x_n)],
// routing computed here in double from the gate weight, one token at a time.
at::Tensor reference_forward(MoeBlock& b, const at::Tensor& x, int64_t k, bool norm,
                             std::vector<int64_t>* counts) {
  torch::NoGradGuard no_grad;
  const at::Tensor W = b.gate->weight.to(at::kDouble);
  const int64_t E = W.size(0);
  counts->assign(E, 0);
  std::vector<at::Tensor> ys;
  for (int64_t n = 0; n < x.size(0); ++n) {
    const at::Tensor xn = x[n].unsqueeze(0);  // [1, C]
    at::Tensor l = at::matmul(W, x[n].to(at::kDouble));
    std::vector<double> p(E);
    double s = 0;
    for (int64_t e = 0; e < E; ++e) s += (p[e] = std::exp(l[e].item<double>()));
    for (double& v : p) v /= s;
    std::vector<int64_t> idx(E);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int64_t a, int64_t c) { return p[a] > p[c]; });
    double wsum = 0;
    for (int64_t j = 0; j < k; ++j) wsum += p[idx[j]];
    at::Tensor yn = at::zeros({x.size(1)}, x.options());
    for (int64_t j = 0; j < k; ++j) {
      const double w = norm ? p[idx[j]] / wsum : p[idx[j]];
      yn = yn + w * b.experts()[idx[j]]->forward(xn)[0];
      (*counts)[idx[j]] += 1;
    }
    if (b.shared_expert) {
      yn = yn + at::sigmoid(b.shared_expert_gate->forward(xn))[0] * b.shared_expert->forward(xn)[0];
    }
    ys.push_back(yn);
  }
  return at::stack(ys);
}

void expect_dropless(const ModelArch& arch) {
  torch::manual_seed(7);
  MoeBlock block(arch, {});
  const at::Tensor x = torch::randn({11, arch.hidden_size});
  auto out = block.forward(x);
  std::vector<int64_t> counts;
  const at::Tensor expected = reference_forward(block, x, arch.experts_per_token, arch.norm_topk_prob, &counts);
  EXPECT_LT((out.y - expected).abs().max().item<double>(), 1e-6) << arch.family;
  ASSERT_EQ(out.expert_counts.size(0), arch.num_experts);
  for (int64_t e = 0; e < arch.num_experts; ++e) EXPECT_EQ(out.expert_counts[e].item<int64_t>(), counts[e]);
  EXPECT_EQ(out.expert_counts.sum().item<int64_t>(), 11 * arch.experts_per_token);  // nothing dropped
}

std::set<std::string> names_of(const MoeBlock& b) {
  std::set<std::string> s;
  for (const auto& p : b.hf_parameters()) s.insert(p.name);
  return s;
}

}  // namespace

TEST(MoeBlock, DroplessQwen2MoeNormalisedWithSharedExpert) {
  expect_dropless(moe_arch("qwen2_moe").shared_expert_intermediate_size(kSharedWidth).build());
}
TEST(MoeBlock, DroplessQwen2MoeUnnormalised) {
  expect_dropless(moe_arch("qwen2_moe").shared_expert_intermediate_size(kSharedWidth).norm_topk_prob(false).build());
}
TEST(MoeBlock, DroplessMixtral) { expect_dropless(moe_arch("mixtral").build()); }

TEST(MoeBlock, AllTokensToOneExpertStillDropsNothing) {
  // A router that sends every token to experts 0 and 1 (capacity-based MoE would drop most).
  torch::manual_seed(3);
  const ModelArch arch = moe_arch("qwen2_moe").build();
  MoeBlock block(arch, {});
  {
    torch::NoGradGuard g;
    block.gate->weight.zero_();
    block.gate->weight[0][0] = 5.0;
    block.gate->weight[1][0] = 4.0;
  }
  at::Tensor x = torch::randn({9, arch.hidden_size});
  x.select(1, 0).fill_(3.0);
  auto out = block.forward(x);
  EXPECT_EQ(out.expert_counts[0].item<int64_t>(), 9);
  EXPECT_EQ(out.expert_counts[1].item<int64_t>(), 9);
  std::vector<int64_t> counts;
  EXPECT_LT((out.y - reference_forward(block, x, 2, true, &counts)).abs().max().item<double>(), 1e-6);
}

TEST(MoeBlock, SharedExpertIsScaledBySigmoidGate) {
  torch::manual_seed(11);
  const ModelArch arch = moe_arch("qwen2_moe").shared_expert_intermediate_size(kSharedWidth).build();
  MoeBlock with_zero_gate(arch, {});
  torch::manual_seed(11);
  MoeBlock routed_only(moe_arch("qwen2_moe").build(), {});  // same seed: same router and experts
  for (size_t e = 0; e < routed_only.experts().size(); ++e) {
    ASSERT_TRUE(at::equal(routed_only.experts()[e]->up_proj->weight, with_zero_gate.experts()[e]->up_proj->weight));
  }
  { torch::NoGradGuard g; with_zero_gate.shared_expert_gate->weight.zero_(); }
  const at::Tensor x = torch::randn({6, arch.hidden_size});
  // A zero gate weight is sigmoid(0) = 1/2 on every token.
  at::Tensor diff = with_zero_gate.forward(x).y - routed_only.forward(x).y;
  EXPECT_LT((diff - 0.5 * with_zero_gate.shared_expert->forward(x)).abs().max().item<double>(), 1e-6);

  // d Σy / d g = Σ_n σ'(g·x_n) · (Σ_c shared(x_n)_c) · x_n, with σ' = σ(1-σ).
  at::Tensor g = torch::randn({1, arch.hidden_size}) * 0.5;
  { torch::NoGradGuard ng; with_zero_gate.shared_expert_gate->weight.copy_(g); }
  with_zero_gate.forward(x).y.sum().backward();
  torch::NoGradGuard ng;
  at::Tensor s = at::sigmoid(at::matmul(x, g.t()));                               // [N, 1]
  at::Tensor shared_sum = with_zero_gate.shared_expert->forward(x).sum(1, true);  // [N, 1]
  at::Tensor expected = (s * (1 - s) * shared_sum * x).sum(0, true);              // [1, C]
  EXPECT_TRUE(torch::allclose(with_zero_gate.shared_expert_gate->weight.grad(), expected, 1e-5, 1e-6));
}

TEST(MoeBlock, HfParameterNamesQwen2Moe) {
  MoeBlock block(moe_arch("qwen2_moe").shared_expert_intermediate_size(kSharedWidth).build(), {});
  std::set<std::string> expected = {"mlp.gate.weight", "mlp.shared_expert.gate_proj.weight",
                                    "mlp.shared_expert.up_proj.weight", "mlp.shared_expert.down_proj.weight",
                                    "mlp.shared_expert_gate.weight"};
  for (int e = 0; e < 4; ++e)
    for (const char* p : {"gate_proj", "up_proj", "down_proj"})
      expected.insert("mlp.experts." + std::to_string(e) + "." + p + ".weight");
  EXPECT_EQ(names_of(block), expected);
  for (const auto& p : block.hf_parameters()) {
    if (p.name == "mlp.experts.2.down_proj.weight") {
      EXPECT_EQ(p.expert, 2);
      EXPECT_EQ(p.tensor.sizes(), (at::IntArrayRef{8, 6}));
    }
    if (p.name == "mlp.gate.weight") EXPECT_EQ(p.tensor.sizes(), (at::IntArrayRef{4, 8}));
    if (p.name == "mlp.shared_expert_gate.weight") EXPECT_EQ(p.tensor.sizes(), (at::IntArrayRef{1, 8}));
    if (p.name.find("experts.") == std::string::npos) EXPECT_EQ(p.expert, -1) << p.name;
  }
}

TEST(MoeBlock, HfNamesAreTorchNamesUnderTheLayer) {
  // Registered under hf_module_name(), the module tree's names are the HF names.
  for (const std::string family : {"qwen2_moe", "mixtral"}) {
    const ModelArch arch =
        moe_arch(family).shared_expert_intermediate_size(family == "qwen2_moe" ? kSharedWidth : 0).build();
    torch::nn::Module layer;
    auto block = layer.register_module(MoeBlock::hf_module_name(arch), std::make_shared<MoeBlock>(arch, hpcrl::parallel::ParallelContext{}));
    std::set<std::string> torch_names;
    for (const auto& p : layer.named_parameters()) torch_names.insert(p.key());
    EXPECT_EQ(torch_names, names_of(*block)) << family;
    for (const auto& p : block->hf_parameters()) EXPECT_TRUE(p.tensor.is_same(layer.named_parameters()[p.name]));
  }
}

TEST(MoeBlock, HfParameterNamesMixtral) {
  MoeBlock block(moe_arch("mixtral").build(), {});
  std::set<std::string> expected = {"block_sparse_moe.gate.weight"};
  for (int e = 0; e < 4; ++e)
    for (const char* p : {"w1", "w2", "w3"})
      expected.insert("block_sparse_moe.experts." + std::to_string(e) + "." + p + ".weight");
  EXPECT_EQ(names_of(block), expected);
  for (const auto& p : block.hf_parameters()) {
    if (p.name == "block_sparse_moe.experts.1.w2.weight") EXPECT_EQ(p.tensor.sizes(), (at::IntArrayRef{8, 6}));
    if (p.name == "block_sparse_moe.experts.1.w3.weight") EXPECT_EQ(p.tensor.sizes(), (at::IntArrayRef{6, 8}));
  }
}

TEST(MoeBlock, GradientsMatchFiniteDifferences) {
  torch::manual_seed(5);
  const ModelArch arch = moe_arch("qwen2_moe").shared_expert_intermediate_size(kSharedWidth).build();
  MoeBlock block(arch, {});
  block.to(at::kDouble);
  const at::Tensor x = torch::randn({7, arch.hidden_size}, at::kDouble).requires_grad_(true);
  const at::Tensor G = torch::randn({7, arch.hidden_size}, at::kDouble);
  auto loss_of = [&] {
    auto out = block.forward(x);
    return (out.y * G).sum() + 0.3 * out.aux_loss;
  };
  loss_of().backward();
  std::vector<std::pair<std::string, at::Tensor>> probes = {
      {"x", x}, {"gate", block.gate->weight}, {"expert1.up", block.experts()[1]->up_proj->weight},
      {"expert3.down", block.experts()[3]->down_proj->weight}, {"shared.gate_proj", block.shared_expert->gate_proj->weight},
      {"shared_gate", block.shared_expert_gate->weight}};
  const double eps = 1e-6;
  for (auto& [name, t] : probes) {
    ASSERT_TRUE(t.grad().defined()) << name;
    for (int64_t i = 0; i < std::min<int64_t>(t.numel(), 12); i += 1) {
      at::Tensor flat = t.view(-1);
      double fd;
      {
        torch::NoGradGuard g;
        const double orig = flat[i].item<double>();
        flat[i] = orig + eps;
        const double up = loss_of().item<double>();
        flat[i] = orig - eps;
        const double down = loss_of().item<double>();
        flat[i] = orig;
        fd = (up - down) / (2 * eps);
      }
      EXPECT_NEAR(t.grad().view(-1)[i].item<double>(), fd, 1e-6 + 1e-5 * std::abs(fd)) << name << "[" << i << "]";
    }
  }
}

TEST(MoeBlock, KeepsLeadingShapeAndMasksPaddingFromAuxLoss) {
  torch::manual_seed(2);
  const ModelArch arch = moe_arch("qwen2_moe").build();
  MoeBlock block(arch, {});
  const at::Tensor x = torch::randn({2, 5, arch.hidden_size});
  at::Tensor mask = torch::ones({2, 5});
  mask[1].narrow(0, 3, 2).zero_();  // last two positions of sequence 1 are padding
  auto out = block.forward(x, mask);
  EXPECT_EQ(out.y.sizes(), x.sizes());
  auto flat = block.forward(x.reshape({10, arch.hidden_size}));
  EXPECT_TRUE(at::allclose(out.y.reshape({10, arch.hidden_size}), flat.y, 1e-6, 1e-7));
  // Padding changes the aux loss (not the outputs): equal to the loss over the 8 real tokens.
  auto real = block.forward(at::cat({x[0], x[1].narrow(0, 0, 3)}));
  EXPECT_NEAR(out.aux_loss.item<double>(), real.aux_loss.item<double>(), 1e-6);
}

TEST(MoeBlock, NoTokens) {
  MoeBlock block(moe_arch("qwen2_moe").shared_expert_intermediate_size(kSharedWidth).build(), {});
  auto out = block.forward(torch::zeros({0, 8}, torch::requires_grad()));
  EXPECT_EQ(out.y.sizes(), (at::IntArrayRef{0, 8}));
  EXPECT_EQ(out.aux_loss.item<double>(), 0.0);
  (out.y.sum() + out.aux_loss).backward();
  // Every expert ran on zero rows, so every parameter has a (zero) gradient.
  for (const auto& p : block.hf_parameters()) {
    ASSERT_TRUE(p.tensor.grad().defined()) << p.name;
    EXPECT_EQ(p.tensor.grad().abs().sum().item<double>(), 0.0) << p.name;
  }
}

TEST(MoeBlock, BadArchitectureIsAnInputError) {
  ModelArch a = moe_arch("qwen2_moe").build();
  a.experts_per_token = 5;
  try {
    MoeBlock b(a, {});
    FAIL() << "expected InputError";
  } catch (const hpcrl::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("num_experts_per_tok = 5 must be in [1, num_experts = 4]"), std::string::npos)
        << e.what();
  }
  ModelArch m = moe_arch("mixtral").shared_expert_intermediate_size(kSharedWidth).build();
  EXPECT_THROW(MoeBlock(m, {}), hpcrl::InputError);
}
