// Batched token choice (see sampling.h).
#include "hpcrl/rollout/sampling.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "hpcrl/parallel/host_threads.h"
#include "hpcrl/rollout/philox.h"
#include "rollout/cpu_kernels.h"

namespace hpcrl::rollout {

namespace {

// Relative weights w = exp((logit - max) / T) of one batch — p / p(most likely)
// — and what the log-probs need of them: rows' max logits and Σ w over the
// whole vocabulary (before any filter).
struct RowWeights {
  at::Tensor weights;  // [R, V] float32
  at::Tensor max;      // [R, 1] float32: the row's largest logit
  at::Tensor total;    // [R] float64: Σ w
};

RowWeights row_weights(const at::Tensor& raw, double temperature) {
  RowWeights w;
  w.max = std::get<0>(raw.max(-1, /*keepdim=*/true));
  w.weights = at::sub(raw, w.max);
  if (temperature != 1.0) w.weights.div_(temperature);
  w.weights.exp_();
  w.total = w.weights.sum(-1, /*keepdim=*/false, at::kDouble);
  return w;
}

// Keeps the smallest most-likely prefix reaching mass `top_p` (a token is
// dropped when the tokens before it already reach it; the first always stays).
// The prefix is looked for among the top 1024 tokens first, then 8x more, so a
// peaked distribution costs a partial selection, not a sort of the vocabulary.
at::Tensor nucleus(const at::Tensor& w, double top_p) {
  const int64_t V = w.size(-1);
  const at::Tensor total = w.sum(-1, /*keepdim=*/true);
  for (int64_t k = std::min<int64_t>(V, 1024);; k = std::min<int64_t>(V, k * 8)) {
    auto [top, order] = w.topk(k, -1);  // descending
    const at::Tensor probs = top / total;
    const at::Tensor cum = probs.cumsum(-1);
    if (k < V && !(cum.narrow(-1, k - 1, 1) >= top_p).all().item<bool>()) continue;
    const at::Tensor keep = at::zeros_like(w, at::kBool).scatter(-1, order, (cum - probs) < top_p);
    return w.masked_fill(keep.logical_not(), 0.0f);
  }
}

// nucleus() over the whole sorted vocabulary: no size read back by the host.
at::Tensor nucleus_by_sort(const at::Tensor& w, double top_p) {
  auto [sorted, order] = w.sort(-1, /*descending=*/true);
  const at::Tensor probs = sorted / sorted.sum(-1, /*keepdim=*/true);
  const at::Tensor keep = at::zeros_like(w, at::kBool).scatter(-1, order, (probs.cumsum(-1) - probs) < top_p);
  return w.masked_fill(keep.logical_not(), 0.0f);
}

// Zeroes the weights of tokens that top-k, top-p or min-p drop. top-p applies
// to the top-k-renormalised distribution; min-p compares with the most likely
// token (weight 1), which every filter keeps, so its order does not matter.
// sync_free: top-p by nucleus_by_sort.
at::Tensor filtered(at::Tensor w, const TokenFilter& f, bool sync_free) {
  const int64_t V = w.size(-1);
  if (f.top_k > 0 && f.top_k < V) {
    at::Tensor kth = std::get<0>(w.topk(f.top_k, -1)).narrow(-1, f.top_k - 1, 1);  // [R, 1]
    w = w.masked_fill(w < kth, 0.0f);
  }
  if (f.top_p < 1.0) w = sync_free ? nucleus_by_sort(w, f.top_p) : nucleus(w, f.top_p);
  if (f.min_p > 0.0) w = w.masked_fill(w < f.min_p, 0.0f);
  return w;
}

// `total` is Σ w, known already when no filter changed the weights.
at::Tensor inverse_cdf(const at::Tensor& w, const at::Tensor& total, const at::Tensor& uniforms, bool sync_free) {
  return w.is_cpu() && !sync_free ? detail::inverse_cdf_by_scan(w, total, uniforms)
                                  : detail::inverse_cdf_by_search(w, uniforms);
}
}  // namespace

namespace detail {

at::Tensor inverse_cdf_by_search(const at::Tensor& w, const at::Tensor& uniforms) {
  const int64_t V = w.size(1);
  at::Tensor cdf = w.cumsum(-1, at::kDouble);
  at::Tensor target = uniforms.to(w.device(), at::kDouble).unsqueeze(-1) * cdf.narrow(-1, V - 1, 1);
  return at::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true).squeeze(-1).clamp_max(V - 1);
}

at::Tensor inverse_cdf_by_scan(const at::Tensor& w, const at::Tensor& total, const at::Tensor& uniforms) {
  const int64_t R = w.size(0), V = w.size(1);
  const at::Tensor rows = w.contiguous();
  const at::Tensor totals = total.to(at::kDouble).contiguous();
  const at::Tensor u = uniforms.to(at::kDouble).contiguous();
  at::Tensor ids = at::empty({R}, at::kLong);
  const float* wp = rows.data_ptr<float>();
  const double* up = u.data_ptr<double>();
  const double* tp = totals.data_ptr<double>();
  int64_t* out = ids.data_ptr<int64_t>();
  parallel::host_parallel_for(0, R, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = wp + r * V;
      const double target = up[r] * tp[r];
      double run = 0;
      int64_t tok = V - 1;
      for (int64_t v = 0; v < V; ++v) {
        run += row[v];
        if (run > target) {
          tok = v;
          break;
        }
      }
      while (row[tok] == 0.0f && tok > 0) --tok;  // rounding past the end lands on a kept token
      out[r] = tok;
    }
  });
  return ids;
}

}  // namespace detail

at::Tensor draw_uniforms(uint64_t seed, const std::vector<DrawKey>& keys) {
  at::Tensor u = at::empty({int64_t(keys.size())}, at::kDouble);
  double* out = u.data_ptr<double>();
  for (size_t r = 0; r < keys.size(); ++r) out[r] = draw_uniform(seed, keys[r].prompt, keys[r].sample, keys[r].step);
  return u;
}

namespace {

// Float32 logits on the CPU with no top-k or top-p (which need a partial sort):
// each row in three passes over its own logits (cpu_kernels.h) — the max, the
// weights with their block sums, the scan of the one block holding the draw —
// with no [R, V] temporary.
bool row_kernels_apply(const at::Tensor& logits, const TokenFilter& f) {
  const int64_t V = logits.size(-1);
  const bool unfiltered = f.temperature <= 0 || ((f.top_k == 0 || f.top_k >= V) && f.top_p >= 1.0);
  return unfiltered && logits.device().is_cpu() && logits.scalar_type() == at::kFloat && logits.dim() == 2 &&
         logits.stride(1) == 1;
}

// The first token whose running weight exceeds target: whole blocks by their
// sums, then the entries of the block it falls in.
int64_t scan_blocks(const float* w, const double* block_sums, int64_t V, double target) {
  double run = 0;
  int64_t b0 = 0;
  while (b0 + cpu::kSumBlock < V && run + block_sums[b0 / cpu::kSumBlock] <= target) {
    run += block_sums[b0 / cpu::kSumBlock];
    b0 += cpu::kSumBlock;
  }
  int64_t tok = V - 1;
  for (int64_t v = b0; v < V; ++v) {
    run += w[v];
    if (run > target) {
      tok = v;
      break;
    }
  }
  while (w[tok] == 0.0f && tok > 0) --tok;  // rounding past the end lands on a kept token
  return tok;
}

ChosenTokens choose_by_rows(const at::Tensor& logits, const TokenFilter& f, const at::Tensor& uniforms,
                            bool tempered_logprobs) {
  const cpu::Kernels& k = cpu::best_kernels();
  const int64_t R = logits.size(0), V = logits.size(1), ld = logits.stride(0);
  const bool greedy = f.temperature <= 0;
  const float scale = greedy ? 1.0f : float(1.0 / f.temperature);
  const bool tempered = tempered_logprobs && !greedy;
  ChosenTokens out{at::empty({R}, at::kLong), at::empty({R}, at::kFloat)};
  const at::Tensor u = greedy ? at::Tensor() : uniforms.to(at::kDouble).contiguous();
  const float* base = logits.data_ptr<float>();
  int64_t* ids = out.ids.data_ptr<int64_t>();
  float* logprobs = out.logprobs.data_ptr<float>();
  parallel::host_parallel_for(0, R, 1, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> w;
    thread_local std::vector<double> blocks;
    w.resize(V);
    blocks.resize((V + cpu::kSumBlock - 1) / cpu::kSumBlock);
    for (int64_t r = begin; r < end; ++r) {
      const float* x = base + r * ld;
      int64_t argmax = 0;
      const float max = k.row_max(x, V, &argmax);
      if (greedy) {
        ids[r] = argmax;
        logprobs[r] = float(-std::log(k.row_exp(x, V, max, 1.0f, 0.0f, nullptr, nullptr, nullptr)));
        continue;
      }
      double all = 0;  // Σ exp((x − max)/T) over the whole vocabulary, before min-p
      const double kept = k.row_exp(x, V, max, scale, float(f.min_p), w.data(), blocks.data(), &all);
      const int64_t id = scan_blocks(w.data(), blocks.data(), V, u.data_ptr<double>()[r] * kept);
      ids[r] = id;
      if (tempered || scale == 1.0f)
        logprobs[r] = float(double((x[id] - max) * scale) - std::log(all));
      else  // the model's own distribution: its sum at temperature 1
        logprobs[r] = float(double(x[id] - max) - std::log(k.row_exp(x, V, max, 1.0f, 0.0f, nullptr, nullptr, nullptr)));
    }
  });
  return out;
}

// choose_tokens in tensor operations on the logits' device; sync_free: none
// that the host reads (choose_tokens_on_device).
ChosenTokens choose_by_tensors(const at::Tensor& logits, const TokenFilter& filter, const at::Tensor& uniforms,
                               bool tempered_logprobs, bool sync_free) {
  const at::Tensor raw = logits.to(at::kFloat);  // [R, V]
  const bool greedy = filter.temperature <= 0;
  const bool tempered = tempered_logprobs && !greedy;
  // log p(id) = (logit(id) − max) / T − log Σ w, from the weights of the
  // distribution the log-probs are of (tempered or the model's own).
  const RowWeights dist = row_weights(raw, tempered ? filter.temperature : 1.0);
  ChosenTokens out;
  if (greedy) {
    out.ids = raw.argmax(-1);
  } else {
    const RowWeights drawn = tempered || filter.temperature == 1.0 ? dist : row_weights(raw, filter.temperature);
    const at::Tensor kept = filtered(drawn.weights, filter, sync_free);  // the same tensor when no filter applies
    const bool unchanged = kept.is_same(drawn.weights);
    out.ids = inverse_cdf(kept, unchanged ? drawn.total : kept.sum(-1, /*keepdim=*/false, at::kDouble), uniforms,
                          sync_free);
  }
  const double T = tempered ? filter.temperature : 1.0;
  at::Tensor chosen = raw.gather(-1, out.ids.unsqueeze(-1)).squeeze(-1);
  out.logprobs = ((chosen - dist.max.squeeze(-1)) / T - dist.total.log().to(at::kFloat));
  return out;
}

}  // namespace

ChosenTokens choose_tokens(const at::Tensor& logits, const TokenFilter& filter, const at::Tensor& uniforms,
                           bool tempered_logprobs) {
  if (row_kernels_apply(logits, filter)) return choose_by_rows(logits, filter, uniforms, tempered_logprobs);
  return choose_by_tensors(logits, filter, uniforms, tempered_logprobs, /*sync_free=*/false);
}

ChosenTokens choose_tokens_on_device(const at::Tensor& logits, const TokenFilter& filter, const at::Tensor& uniforms,
                                     bool tempered_logprobs) {
  return choose_by_tensors(logits, filter, uniforms, tempered_logprobs, /*sync_free=*/true);
}

}  // namespace hpcrl::rollout
