// Attention kernels (attention_kernel.h). The only file with LibTorch-version
// guards around attention:
//   1.13       : attend_reference (explicit scores, fp32 softmax like HF's eager path)
//   2.0 – 2.4  : at::scaled_dot_product_attention, KV heads repeated for GQA
//   ≥ 2.5      : at::scaled_dot_product_attention(enable_gqa=true)
#include "hpcrl/model/attention_kernel.h"

#include <torch/utils.h>
#include <torch/version.h>

#include <cmath>

#include "hpcrl/util/check.h"

namespace hpcrl::model {

// Which of the paths below keeps the softmax for the backward, and which repeats
// the KV heads, is stated in attention_saves_scores.h, from which `hpcrl plan`
// sizes the activations: change the two together.

namespace {

// [1, 1, Tq, Tk]: query i (absolute position Tk − Tq + i) sees keys j ≤ Tk − Tq + i.
at::Tensor causal_mask(int64_t tq, int64_t tk, at::Device device) {
  auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  at::Tensor query_pos = (at::arange(tq, longs) + (tk - tq)).unsqueeze(1);  // [Tq, 1]
  at::Tensor key_pos = at::arange(tk, longs).unsqueeze(0);                  // [1, Tk]
  return (key_pos <= query_pos).view({1, 1, tq, tk});
}

}  // namespace

at::Tensor attention_mask(const at::Tensor& key_segments, int64_t tq, int64_t tk) {
  HPCRL_CHECK(tq <= tk, "attention over " << tk << " keys for " << tq << " queries");
  if (!key_segments.defined() && tq == tk) return {};
  auto device = key_segments.defined() ? key_segments.device() : at::Device(at::kCPU);
  at::Tensor causal = causal_mask(tq, tk, device).view({tq, tk});
  if (!key_segments.defined()) return causal.view({1, 1, tq, tk});
  HPCRL_CHECK(key_segments.dim() == 2 && key_segments.size(1) == tk,
              "attention mask " << key_segments.sizes() << " does not cover the " << tk << " keys");
  at::Tensor seg = key_segments.to(at::kLong);                               // [B, Tk]
  at::Tensor query_seg = seg.narrow(1, tk - tq, tq).unsqueeze(2);            // [B, Tq, 1]
  at::Tensor same = (seg.unsqueeze(1) == query_seg) & (seg != 0).unsqueeze(1);  // [B, Tq, Tk]
  at::Tensor allowed = causal.unsqueeze(0) & same;
  // Every query may see itself: keeps the rows of padding queries non-empty.
  auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  at::Tensor self = (at::arange(tk, longs).unsqueeze(0) == (at::arange(tq, longs) + (tk - tq)).unsqueeze(1))
                        .unsqueeze(0);  // [1, Tq, Tk]: query i ↔ key Tk − Tq + i
  return (allowed | self).unsqueeze(1);
}

at::Tensor attend_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed) {
  const int64_t B = q.size(0), H = q.size(1), Tq = q.size(2), D = q.size(3);
  const int64_t Hkv = k.size(1), Tk = k.size(2), G = H / Hkv;
  HPCRL_CHECK(H % Hkv == 0, H << " query heads cannot share " << Hkv << " key/value heads");
  // Fold each KV head's G query heads into its rows: [B, Hkv, G·Tq, D], so k and v
  // are used as they are instead of being repeated G times.
  at::Tensor qg = q.reshape({B, Hkv, G * Tq, D});
  at::Tensor scores = at::matmul(qg, k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
  scores = scores.view({B, Hkv, G, Tq, Tk});
  at::Tensor mask = allowed.defined() ? allowed : causal_mask(Tq, Tk, q.device());  // [B|1, 1, Tq, Tk]
  scores = scores.masked_fill(~mask.unsqueeze(2), -std::numeric_limits<float>::infinity());
  at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  at::Tensor out = at::matmul(probs.view({B, Hkv, G * Tq, Tk}), v);  // [B, Hkv, G·Tq, D]
  return out.view({B, H, Tq, D});
}

at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed) {
#if TORCH_VERSION_MAJOR >= 2
  const bool causal = !allowed.defined() && q.size(2) == k.size(2);
  at::Tensor mask = allowed.defined() || causal ? allowed : causal_mask(q.size(2), k.size(2), q.device());
  c10::optional<at::Tensor> opt_mask = mask.defined() ? c10::optional<at::Tensor>(mask) : c10::nullopt;
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 5
  return at::scaled_dot_product_attention(q, k, v, opt_mask, 0.0, causal, c10::nullopt, /*enable_gqa=*/k.size(1) != q.size(1));
#else
  const int64_t groups = q.size(1) / k.size(1);
  at::Tensor kr = groups > 1 ? k.repeat_interleave(groups, 1) : k;
  at::Tensor vr = groups > 1 ? v.repeat_interleave(groups, 1) : v;
  return at::scaled_dot_product_attention(q, kr, vr, opt_mask, 0.0, causal);
#endif
#else
  return attend_reference(q, k, v, allowed);
#endif
}

}  // namespace hpcrl::model
