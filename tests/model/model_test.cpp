// Single-rank properties of DecoderModel: HF parameter names and shapes per
// family, padding invariance, KV-cache decoding equal to a full forward,
// log-probs/entropy equal to a full log-softmax, bf16, and activation
// checkpointing leaving every gradient unchanged.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <set>

#include "hpcrl/model/checkpointing.h"
#include "hpcrl/model/decoder_model.h"
#include "test_models.h"

namespace hpcrl::model {
namespace {

using testing::positions_from_mask;
using testing::tiny_arch;

std::shared_ptr<DecoderModel> make(const ModelArch& arch, bool value_head = false, bool ckpt = false) {
  ModelOptions o;
  o.value_head = value_head;
  o.activation_checkpointing = ckpt;
  o.seed = 7;
  return std::make_shared<DecoderModel>(arch, parallel::ParallelContext{}, o);
}

std::map<std::string, std::vector<int64_t>> shapes(DecoderModel& m) {
  std::map<std::string, std::vector<int64_t>> s;
  for (const auto& p : m.named_parameters()) s[p.key()] = p.value().sizes().vec();
  return s;
}

TEST(DecoderModel, Qwen2ParametersHaveHfNamesAndShapes) {
  ModelArch a = tiny_arch("qwen2", /*tied=*/false);
  auto m = make(a, /*value_head=*/true);
  auto s = shapes(*m);
  const std::string l = "model.layers.1.";
  std::map<std::string, std::vector<int64_t>> expected = {
      {"model.embed_tokens.weight", {64, 32}},       {"model.norm.weight", {32}},
      {"lm_head.weight", {64, 32}},                  {"score.weight", {1, 32}},
      {l + "input_layernorm.weight", {32}},          {l + "post_attention_layernorm.weight", {32}},
      {l + "self_attn.q_proj.weight", {64, 32}},     {l + "self_attn.q_proj.bias", {64}},
      {l + "self_attn.k_proj.weight", {16, 32}},     {l + "self_attn.k_proj.bias", {16}},
      {l + "self_attn.v_proj.weight", {16, 32}},     {l + "self_attn.v_proj.bias", {16}},
      {l + "self_attn.o_proj.weight", {32, 64}},     {l + "mlp.gate_proj.weight", {48, 32}},
      {l + "mlp.up_proj.weight", {48, 32}},          {l + "mlp.down_proj.weight", {32, 48}}};
  for (const auto& [name, shape] : expected) {
    ASSERT_TRUE(s.count(name)) << name;
    EXPECT_EQ(s[name], shape) << name;
  }
  EXPECT_EQ(s.size(), 4u + 2u * 12u);  // embed, norm, lm_head, score + 12 per layer
  EXPECT_FALSE(s.count(l + "self_attn.o_proj.bias"));  // qwen2 has QKV bias only
}

TEST(DecoderModel, Qwen3HasQkNormAndTiedModelsHaveNoLmHead) {
  auto m = make(tiny_arch("qwen3", /*tied=*/true));
  auto s = shapes(*m);
  EXPECT_EQ(s["model.layers.0.self_attn.q_norm.weight"], std::vector<int64_t>{8});
  EXPECT_EQ(s["model.layers.0.self_attn.k_norm.weight"], std::vector<int64_t>{8});
  EXPECT_FALSE(s.count("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(s.count("lm_head.weight"));
  // The q/k norm is really applied: changing its weight changes the output.
  torch::NoGradGuard ng;
  at::Tensor ids = torch::randint(64, {1, 6}, torch::kLong);
  at::Tensor before = m->forward(ids).hidden;
  m->named_parameters()["model.layers.0.self_attn.k_norm.weight"].mul_(2.0);
  EXPECT_GT((m->forward(ids).hidden - before).abs().max().item<float>(), 1e-3);
}

TEST(DecoderModel, LogprobsAndEntropyEqualFullLogSoftmax) {
  auto m = make(tiny_arch("llama", false));
  torch::manual_seed(5);
  at::Tensor ids = torch::randint(64, {2, 7}, torch::kLong), targets = torch::randint(64, {2, 7}, torch::kLong);
  torch::NoGradGuard ng;
  at::Tensor h = m->forward(ids).hidden;
  auto lp = m->token_logprobs(h, targets);
  at::Tensor logp = torch::log_softmax(m->local_logits(h).to(torch::kDouble), -1);
  at::Tensor expected = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1);
  EXPECT_LT((lp.logprobs.to(torch::kDouble) - expected).abs().max().item<double>(), 1e-5);
  at::Tensor entropy = -(logp.exp() * logp).sum(-1);
  EXPECT_LT((lp.entropy.to(torch::kDouble) - entropy).abs().max().item<double>(), 1e-5);
}

// A left-padded and a right-padded row give the unpadded sequence's log-probs.
TEST(DecoderModel, PaddingDoesNotChangeLogprobs) {
  auto m = make(tiny_arch("qwen2"));
  torch::NoGradGuard ng;
  at::Tensor seq = torch::tensor({5, 9, 2, 33, 17, 4}, torch::kLong).view({1, 6});
  at::Tensor next = torch::tensor({9, 2, 33, 17, 4, 1}, torch::kLong).view({1, 6});
  at::Tensor ref = m->token_logprobs(m->forward(seq).hidden, next).logprobs;  // [1, 6]

  at::Tensor pad = torch::zeros({1, 2}, torch::kLong);
  at::Tensor ids = torch::cat({torch::cat({pad, seq}, 1), torch::cat({seq, pad}, 1)}, 0);  // [2, 8]
  at::Tensor targets = torch::cat({torch::cat({pad, next}, 1), torch::cat({next, pad}, 1)}, 0);
  at::Tensor mask = ids.new_ones({2, 8});
  mask.index_put_({0, torch::indexing::Slice(0, 2)}, 0);
  mask.index_put_({1, torch::indexing::Slice(6, 8)}, 0);
  at::Tensor lp = m->token_logprobs(m->forward(ids, positions_from_mask(mask), mask).hidden, targets).logprobs;
  EXPECT_LT((lp[0].slice(0, 2, 8) - ref[0]).abs().max().item<float>(), 1e-5);
  EXPECT_LT((lp[1].slice(0, 0, 6) - ref[0]).abs().max().item<float>(), 1e-5);
  EXPECT_FALSE(lp.isnan().any().item<bool>());  // padding rows stay finite
}

TEST(DecoderModel, KvCacheDecodingEqualsFullForward) {
  for (const char* family : {"qwen2", "qwen3"}) {
    auto m = make(tiny_arch(family));
    torch::NoGradGuard ng;
    torch::manual_seed(6);
    at::Tensor ids = torch::randint(1, 64, {2, 9}, torch::kLong);
    at::Tensor mask = ids.new_ones({2, 9});
    mask.index_put_({1, torch::indexing::Slice(0, 3)}, 0);  // row 1 left-padded by 3
    at::Tensor pos = positions_from_mask(mask);
    at::Tensor full = m->local_logits(m->forward(ids, pos, mask).hidden);  // [2, 9, V]

    KvCache cache = m->new_kv_cache();
    const int64_t prefill = 5;
    at::Tensor out = m->local_logits(
        m->forward(ids.slice(1, 0, prefill), pos.slice(1, 0, prefill), mask.slice(1, 0, prefill), &cache).hidden);
    EXPECT_LT((out - full.slice(1, 0, prefill)).abs().max().item<float>(), 1e-5) << family;
    for (int64_t t = prefill; t < 9; ++t) {
      at::Tensor step = m->local_logits(
          m->forward(ids.slice(1, t, t + 1), pos.slice(1, t, t + 1), mask.slice(1, 0, t + 1), &cache).hidden);
      EXPECT_LT((step - full.slice(1, t, t + 1)).abs().max().item<float>(), 1e-5) << family << " step " << t;
    }
    EXPECT_EQ(cache.length(), 9);
    EXPECT_EQ(cache.layers[0].k.size(1), 2);  // local KV heads, not repeated
  }
}

TEST(DecoderModel, Bfloat16ForwardTracksFloat32) {
  auto m = make(tiny_arch("qwen2"));
  torch::NoGradGuard ng;
  at::Tensor ids = torch::randint(64, {2, 8}, torch::kLong), targets = torch::randint(64, {2, 8}, torch::kLong);
  at::Tensor lp32 = m->token_logprobs(m->forward(ids).hidden, targets).logprobs;
  m->to(torch::kBFloat16);
  at::Tensor h16 = m->forward(ids).hidden;
  EXPECT_EQ(h16.scalar_type(), torch::kBFloat16);
  at::Tensor lp16 = m->token_logprobs(h16, targets).logprobs;
  EXPECT_EQ(lp16.scalar_type(), torch::kFloat);  // log-probs are always fp32
  EXPECT_LT((lp16 - lp32).abs().max().item<float>(), 0.05);
}

// loss = -mean log p + values² + 0.1·entropy: touches every head and parameter.
at::Tensor training_loss(DecoderModel& m, const at::Tensor& ids, const at::Tensor& targets, const at::Tensor& mask) {
  auto out = m.forward(ids, positions_from_mask(mask), mask);
  auto lp = m.token_logprobs(out.hidden, targets);
  at::Tensor w = mask.to(torch::kFloat);
  return (-(lp.logprobs * w).sum() + (m.values(out.hidden).pow(2) * w).sum() + 0.1 * (lp.entropy * w).sum()) / w.sum();
}

TEST(ActivationCheckpointing, ModelGradientsAreUnchanged) {
  ModelArch a = tiny_arch("qwen3", false);
  auto plain = make(a, true, false), ckpt = make(a, true, true);
  torch::manual_seed(8);
  at::Tensor ids = torch::randint(64, {2, 8}, torch::kLong), targets = torch::randint(64, {2, 8}, torch::kLong);
  at::Tensor mask = ids.new_ones({2, 8});
  mask.index_put_({0, 0}, 0);
  at::Tensor l1 = training_loss(*plain, ids, targets, mask);
  at::Tensor l2 = training_loss(*ckpt, ids, targets, mask);
  l1.backward();
  l2.backward();
  EXPECT_FLOAT_EQ(l1.item<float>(), l2.item<float>());
  auto g2 = ckpt->named_parameters();
  int compared = 0;
  for (const auto& p : plain->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    ASSERT_TRUE(g2[p.key()].grad().defined()) << p.key();
    EXPECT_LT((p.value().grad() - g2[p.key()].grad()).abs().max().item<float>(), 1e-6) << p.key();
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(plain->parameters().size()));
}

// A block with dropout: recomputation must replay the same mask (stashed RNG).
TEST(ActivationCheckpointing, RestoresRngStateForDropout) {
  torch::manual_seed(9);
  at::Tensor w = torch::randn({16, 16}, torch::requires_grad());
  at::Tensor x0 = torch::randn({4, 16});
  auto block = [&](const std::vector<at::Tensor>& in) -> std::vector<at::Tensor> {
    return {torch::dropout(torch::tanh(torch::matmul(in[0], w)), 0.5, /*train=*/true)};
  };
  auto run = [&](bool ckpt) {
    w.mutable_grad() = at::Tensor();
    at::Tensor x = x0.clone().requires_grad_(true);
    torch::manual_seed(10);
    at::Tensor y = ckpt ? checkpoint(block, {x})[0] : block({x})[0];
    torch::manual_seed(11);  // RNG moves on between forward and backward
    (y * y).sum().backward();
    return std::make_tuple(y.detach(), w.grad().clone(), x.grad().clone());
  };
  auto [y1, gw1, gx1] = run(false);
  auto [y2, gw2, gx2] = run(true);
  EXPECT_TRUE(torch::equal(y1, y2));
  EXPECT_LT((gw1 - gw2).abs().max().item<float>(), 1e-6);
  EXPECT_LT((gx1 - gx2).abs().max().item<float>(), 1e-6);
  // And the dropout really is random: a different seed gives different gradients.
  torch::manual_seed(12);
  at::Tensor x = x0.clone().requires_grad_(true);
  w.mutable_grad() = at::Tensor();
  (block({x})[0].pow(2)).sum().backward();
  EXPECT_GT((w.grad() - gw1).abs().max().item<float>(), 1e-4);
}

TEST(DecoderModel, SameSeedSameWeightsDifferentSeedDifferent) {
  ModelArch a = tiny_arch("qwen2");
  auto m1 = make(a), m2 = make(a);
  ModelOptions o;
  o.seed = 8;
  DecoderModel m3(a, parallel::ParallelContext{}, o);
  auto p2 = m2->named_parameters(), p3 = m3.named_parameters();
  for (const auto& p : m1->named_parameters()) EXPECT_TRUE(torch::equal(p.value(), p2[p.key()])) << p.key();
  EXPECT_FALSE(torch::equal(m1->named_parameters()["model.embed_tokens.weight"], p3["model.embed_tokens.weight"]));
  EXPECT_NEAR(m1->named_parameters()["model.layers.0.mlp.up_proj.weight"].std().item<float>(), 0.02, 0.003);
}

}  // namespace
}  // namespace hpcrl::model

// ZeRO-3 gathers a model unit by unit: a decoder layer, or everything else.
TEST(ParameterUnits, LayersAreTheirOwnUnitAndTheRestIsOuter) {
  EXPECT_EQ(hpcrl::model::parameter_unit_of("model.layers.0.self_attn.q_proj.weight"), 0);
  EXPECT_EQ(hpcrl::model::parameter_unit_of("model.layers.12.mlp.experts.3.up_proj.weight"), 12);
  EXPECT_EQ(hpcrl::model::parameter_unit_of("model.embed_tokens.weight"), hpcrl::model::ParameterUnits::kOuter);
  EXPECT_EQ(hpcrl::model::parameter_unit_of("model.norm.weight"), hpcrl::model::ParameterUnits::kOuter);
  EXPECT_EQ(hpcrl::model::parameter_unit_of("lm_head.weight"), hpcrl::model::ParameterUnits::kOuter);
  EXPECT_EQ(hpcrl::model::parameter_unit_of("score.weight"), hpcrl::model::ParameterUnits::kOuter);
  EXPECT_EQ(hpcrl::model::parameter_unit_of("model.layers.x.mlp.up_proj.weight"), hpcrl::model::ParameterUnits::kOuter);
}
