// Shared pieces of the rollout tests: small models (the stories260k fixture, a
// random Qwen2-shaped model with QKV biases and GQA, a random MoE model), the
// no-cache reference generator that recomputes the whole sequence with
// DecoderModel::forward at every step, and the docs/rollout.md equality check.
#pragma once

#include <gtest/gtest.h>
#include <torch/utils.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/util/error.h"
#include "model/test_models.h"

namespace hpcrl::testing {

inline const std::string kStories = std::string(HPCRL_DATA_DIR) + "/stories260k";

inline std::shared_ptr<model::DecoderModel> stories(const parallel::ParallelContext& ctx = {}) {
  auto m = model::load_model(kStories, ctx);
  m->eval();
  return m;
}

// family qwen2: QKV bias, 4 query heads sharing 2 KV heads, untied head.
inline ModelArch qwen2_arch() {
  return test_arch()
      .family("qwen2")
      .vocab_size(96)
      .hidden_size(64)
      .intermediate_size(112)
      .num_layers(3)
      .num_heads(4)
      .num_kv_heads(2)
      .head_dim(16)
      .max_position_embeddings(128)
      .rope_theta(10000.0)
      .rms_norm_eps(1e-6)
      .tie_word_embeddings(false)
      .attention_bias(true)
      .build();
}

// qwen2_moe: 4 experts, top-2, a shared expert.
inline ModelArch moe_arch() {
  return test_arch(qwen2_arch())
      .family("qwen2_moe")
      .num_experts(4)
      .experts_per_token(2)
      .moe_intermediate_size(48)
      .shared_expert_intermediate_size(40)
      .build();
}

// A single-rank model whose seeded N(0, 0.02²) weights are replaced by wider
// random ones (matrices ×10, norm weights and biases drawn), so logits are far
// from uniform and greedy decoding has few near-ties.
inline std::shared_ptr<model::DecoderModel> random_model(const ModelArch& arch, uint64_t seed = 3) {
  model::ModelOptions o;
  o.seed = seed;
  auto m = std::make_shared<model::DecoderModel>(arch, parallel::ParallelContext{}, o);
  torch::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed + 101);
  for (auto& p : m->named_parameters()) {
    at::Tensor w = p.value();
    if (p.key().find("norm") != std::string::npos) w.copy_(1.0 + 0.2 * at::randn(w.sizes(), gen, w.options()));
    else if (p.key().find("bias") != std::string::npos) w.copy_(0.3 * at::randn(w.sizes(), gen, w.options()));
    else w.mul_(10.0);
  }
  m->eval();
  return m;
}

// The same weights as `full_model` (a single-rank model) in the layout `ctx`.
inline std::shared_ptr<model::DecoderModel> in_layout(model::DecoderModel& full_model,
                                                      const parallel::ParallelContext& ctx) {
  model::ModelOptions o;
  o.init = false;
  auto m = std::make_shared<model::DecoderModel>(full_model.arch(), ctx, o);
  std::map<std::string, at::Tensor> full;
  for (auto& [name, t] : model::gather_full_weights(full_model)) full.emplace(name, t);
  model::load_weights(*m, full, "the single-rank test model");
  m->eval();
  return m;
}

// Random prompts of the given lengths over ids [lo, vocab).
inline std::vector<std::vector<int32_t>> random_prompts(const std::vector<int64_t>& lengths, int64_t vocab,
                                                        uint64_t seed, int32_t lo = 3) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::vector<std::vector<int32_t>> out;
  for (int64_t L : lengths) {
    at::Tensor ids = at::randint(lo, vocab, {L}, gen, at::kLong);
    std::vector<int32_t> v;
    for (int64_t t = 0; t < L; ++t) v.push_back(static_cast<int32_t>(ids[t].item<int64_t>()));
    out.push_back(v);
  }
  return out;
}

// Full-vocabulary logits after `seq` (tp = 1 model), recomputed from scratch.
inline at::Tensor next_logits(model::DecoderModel& m, const std::vector<int32_t>& seq) {
  torch::NoGradGuard no_grad;
  at::Tensor ids = at::tensor(std::vector<int64_t>(seq.begin(), seq.end()), at::kLong).unsqueeze(0);
  auto out = m.forward(ids);
  return m.local_logits(out.hidden)[0][ids.size(1) - 1].to(at::kDouble);  // [V]
}

// The log-prob of every token of `sample` under `m`'s training forward over
// prompt + tokens (a multi-turn sample's replies included), in float64.
inline std::vector<double> training_logprobs(model::DecoderModel& m, const std::vector<int32_t>& prompt,
                                             const rollout::Sample& sample) {
  torch::NoGradGuard no_grad;
  std::vector<int64_t> seq(prompt.begin(), prompt.end());
  seq.insert(seq.end(), sample.tokens.begin(), sample.tokens.end());
  at::Tensor lp = m.local_logits(m.forward(at::tensor(seq, at::kLong).unsqueeze(0)).hidden)[0]
                      .to(at::kDouble)
                      .log_softmax(-1);
  std::vector<double> out;
  for (size_t t = 0; t < sample.tokens.size(); ++t)
    out.push_back(lp[int64_t(prompt.size() + t) - 1][sample.tokens[t]].item<double>());
  return out;
}

// Greedy decoding without a cache: every step runs the whole sequence.
inline rollout::Sample reference_greedy(model::DecoderModel& m, const std::vector<int32_t>& prompt,
                                        int64_t max_new_tokens, const std::vector<int32_t>& eos = {}) {
  rollout::Sample s;
  std::vector<int32_t> seq = prompt;
  while (int64_t(s.tokens.size()) < max_new_tokens) {
    at::Tensor logits = next_logits(m, seq);
    int64_t tok = logits.argmax().item<int64_t>();
    s.tokens.push_back(int32_t(tok));
    s.logprobs.push_back(logits.log_softmax(0)[tok].item<float>());
    seq.push_back(int32_t(tok));
    if (std::find(eos.begin(), eos.end(), tok) != eos.end()) {
      s.finish_reason = "stop";
      return s;
    }
  }
  s.finish_reason = "length";
  return s;
}

// docs/rollout.md: the same generation means log-probs within 1e-5 and identical
// tokens, except that at a near-tie (the two candidate tokens' logits, judged by
// the tp = 1 reference model, within 1e-4) the two may part ways; nothing after
// that point is compared.
inline ::testing::AssertionResult same_generation(model::DecoderModel& reference, const std::vector<int32_t>& prompt,
                                                  const rollout::Sample& a, const rollout::Sample& b,
                                                  double logprob_tol = 1e-5) {
  const size_t n = std::min(a.tokens.size(), b.tokens.size());
  for (size_t t = 0; t < n; ++t) {
    if (a.tokens[t] != b.tokens[t]) {
      std::vector<int32_t> prefix = prompt;
      prefix.insert(prefix.end(), a.tokens.begin(), a.tokens.begin() + t);
      at::Tensor logits = next_logits(reference, prefix);
      double gap = std::abs(logits[a.tokens[t]].item<double>() - logits[b.tokens[t]].item<double>());
      if (gap < 1e-4) return ::testing::AssertionSuccess() << "near-tie at token " << t;
      return ::testing::AssertionFailure() << "token " << t << " differs: " << a.tokens[t] << " vs " << b.tokens[t]
                                           << " with a logit gap of " << gap << " (not a near-tie)";
    }
    if (std::abs(a.logprobs[t] - b.logprobs[t]) > logprob_tol)
      return ::testing::AssertionFailure() << "log-prob of token " << t << " differs: " << a.logprobs[t] << " vs "
                                           << b.logprobs[t];
  }
  if (a.tokens.size() != b.tokens.size() || a.finish_reason != b.finish_reason)
    return ::testing::AssertionFailure() << "lengths " << a.tokens.size() << " vs " << b.tokens.size()
                                         << ", finish " << a.finish_reason << " vs " << b.finish_reason;
  return ::testing::AssertionSuccess();
}

// Two runs of one multi-turn trajectory: the same tokens, sampled/inserted
// marks and ending, and log-probs within `tol`.
inline ::testing::AssertionResult same_trajectory(const rollout::Sample& a, const rollout::Sample& b,
                                                  double tol = 1e-5) {
  if (a.tokens != b.tokens) return ::testing::AssertionFailure() << "the tokens differ";
  if (a.sampled != b.sampled) return ::testing::AssertionFailure() << "the sampled marks differ";
  if (a.finish_reason != b.finish_reason)
    return ::testing::AssertionFailure() << "finish " << a.finish_reason << " vs " << b.finish_reason;
  for (size_t t = 0; t < a.logprobs.size(); ++t)
    if (std::abs(a.logprobs[t] - b.logprobs[t]) > tol)
      return ::testing::AssertionFailure() << "log-prob of token " << t << ": " << a.logprobs[t] << " vs "
                                           << b.logprobs[t];
  return ::testing::AssertionSuccess();
}

// An engine of `max_batch` slots that reads the tokens every step (so a pause comes at the exact step).
inline rollout::EngineOptions slots_read_every_step(int64_t max_batch) {
  rollout::EngineOptions o;
  o.max_batch = max_batch;
  o.host_sync_interval = 1;
  return o;
}

// Sampling at temperature 1 with 7 EOS ids of the random model's 96 (~7 % a step to end), so samples end at
// different steps and a pause finds rows part-way.
inline rollout::SamplingParams sampled_with_eos(int64_t max_new_tokens, uint64_t seed) {
  rollout::SamplingParams p;
  p.temperature = 1.0;
  p.max_new_tokens = max_new_tokens;
  p.seed = seed;
  p.eos_ids = {5, 11, 17, 23, 29, 31, 37};
  return p;
}

// The message of the InputError `fn` throws ("(no InputError)" when it throws none).
inline std::string input_error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace hpcrl::testing
