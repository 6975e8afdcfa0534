// Choosing the next token of every live row at once, on the logits' device:
// greedy, or a draw from the tempered distribution restricted by top-k, top-p
// (nucleus) and min-p, with each row's log-prob of its token. A row's draw is
// the inverse CDF of its filtered distribution at one uniform number from
// Philox keyed by (seed, prompt, sample, step) (philox.h), so what a sequence
// samples does not depend on the batch, its slot, the layout or the device.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace hpcrl::rollout {

struct TokenFilter {
  double temperature = 1.0;  // 0 = greedy (argmax)
  int64_t top_k = 0;         // 0 = off
  double top_p = 1.0;        // 1 = off
  double min_p = 0.0;        // 0 = off: keep tokens with p >= min_p · p(most likely)
};

// Where one row's draw sits in its sequence: token `step` of sample `sample` of
// global prompt `prompt`.
struct DrawKey {
  int64_t prompt = 0, sample = 0, step = 0;
};

// [R] float64 uniforms in [0, 1) on the CPU, one per key, under `seed`.
at::Tensor draw_uniforms(uint64_t seed, const std::vector<DrawKey>& keys);

struct ChosenTokens {
  at::Tensor ids;       // [R] int64, on the logits' device
  at::Tensor logprobs;  // [R] float32: log p(id) over the whole vocabulary (before any filter)
};

// logits: [R, V] untempered, any float dtype and device; uniforms: [R] from
// draw_uniforms (unused when greedy). Log-probs are of softmax(logits /
// temperature) when `tempered_logprobs` and sampling, else of softmax(logits).
ChosenTokens choose_tokens(const at::Tensor& logits, const TokenFilter& filter, const at::Tensor& uniforms,
                           bool tempered_logprobs);

// choose_tokens with no read by the host and shapes fixed by the logits' alone
// (top-p by a full sort instead of a partial selection grown until it holds the
// nucleus; the inverse CDF by cumulative sum and binary search on any device),
// so a CUDA graph can hold it: the fixed decode step's choice. The same tokens
// as choose_tokens (ties in the sort aside) and log-probs within float32 rounding.
ChosenTokens choose_tokens_on_device(const at::Tensor& logits, const TokenFilter& filter, const at::Tensor& uniforms,
                                     bool tempered_logprobs);

namespace detail {
// The two ways choose_tokens draws from weights w [R, V] (float32, ≥ 0, the
// row's kept tokens > 0) at uniforms u [R]: the first token whose running
// weight, summed in float64, exceeds u · Σ w (the scan takes Σ w, [R], which
// choose_tokens already has when no filter changed the weights). On the CPU a scan per row that
// stops there (half a pass on average, nothing [R, V] allocated); on a device a
// cumulative sum and a binary search. Both are exposed so a CPU test can hold
// them to the same answers.
at::Tensor inverse_cdf_by_scan(const at::Tensor& w, const at::Tensor& total, const at::Tensor& uniforms);
at::Tensor inverse_cdf_by_search(const at::Tensor& w, const at::Tensor& uniforms);
}  // namespace detail

}  // namespace hpcrl::rollout
