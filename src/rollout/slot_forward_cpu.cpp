// The decode step's layers on the CPU float32 path (slot_forward.h,
// decode_layers_cpu): the same composition as run_layers — DecoderLayer +
// Attention + Mlp at one token per row — with RMSNorm, RoPE, the new key/value
// column and attention done by the CPU kernels (src/rollout/cpu_kernels.h),
// one pass each on reused buffers, where LibTorch spends a handful of
// dispatched ops apiece (at one row the dispatch costs as much as the work).
// The linear layers are SlotProjections' either way (packed GEMMs from two rows on).
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "hpcrl/model/attention.h"
#include "hpcrl/model/decoder_layer.h"
#include "hpcrl/model/rms_norm.h"
#include "hpcrl/parallel/host_threads.h"
#include "hpcrl/parallel/tensor/comm_ops.h"
#include "hpcrl/rollout/slot_forward.h"
#include "rollout/cpu_kernels.h"

namespace hpcrl::rollout {

namespace {
// y = RMSNorm(x) with `weight` into `out` ([R, C] float32).
void rms_norm(const cpu::Kernels& k, const at::Tensor& x, const at::Tensor& weight, float eps, at::Tensor& out) {
  k.rms_norm(x.data_ptr<float>(), x.size(0), x.stride(0), x.size(1), weight.data_ptr<float>(), eps,
             out.data_ptr<float>(), out.stride(0));
}
}  // namespace

at::Tensor SlotForward::decode_layers_cpu(at::Tensor x, KvSlots& slots, const model::RopeTables& rope) {
  const cpu::Kernels& k = cpu::best_kernels();
  const int64_t R = x.size(0), C = x.size(1), D = model_.arch().head_dim, H = heads_, Hkv = kv_heads_;
  const int64_t G = H / Hkv, capacity = slots.capacity();
  const float eps = float(model_.arch().rms_norm_eps), scale = float(1.0 / std::sqrt(double(D)));
  const auto& tp = model_.parallel_context().tp;
  using Norm = SlotProjections::Norm;
  const at::Tensor cos = rope.cos.reshape({R, D}).contiguous(), sin = rope.sin.reshape({R, D}).contiguous();
  std::vector<int64_t> column(R);  // this step's key/value column of each row
  int64_t longest = 0;
  for (int64_t r = 0; r < R; ++r) longest = std::max(longest, column[r] = slots.length(r));
  x = x.contiguous();
  at::Tensor normed = normed_out_.take(R, C), attended = attention_out_.take(R, H * D);
  const size_t L = model_.model->layers->size();
  for (size_t i = 0; i < L; ++i) {
    rms_norm(k, x, proj_.norm_weight(i, Norm::input), eps, normed);
    auto [q, key, value] = proj_.qkv(int64_t(i), parallel::tensor::copy_to_tp(normed, tp));  // [R, ·] views
    if (const at::Tensor& q_norm = proj_.norm_weight(i, Norm::q); q_norm.defined()) {
      // Qwen3: per-head norms before RoPE, through the model's RMSNorm
      q = model::rms_norm(q.view({R, H, D}), q_norm, model_.arch().rms_norm_eps).reshape({R, H * D});
      key = model::rms_norm(key.view({R, Hkv, D}), proj_.norm_weight(i, Norm::k), model_.arch().rms_norm_eps)
                .reshape({R, Hkv * D});
    }
    float* qp = q.data_ptr<float>();
    float* kp = key.data_ptr<float>();
    const float* vp = value.data_ptr<float>();
    k.rotate(qp, R, q.stride(0), H, D, cos.data_ptr<float>(), sin.data_ptr<float>(), D);
    k.rotate(kp, R, key.stride(0), Hkv, D, cos.data_ptr<float>(), sin.data_ptr<float>(), D);
    float* kc = slots.k(int64_t(i)).data_ptr<float>();  // [S, Hkv, capacity, D]
    float* vc = slots.v(int64_t(i)).data_ptr<float>();
    for (int64_t r = 0; r < R; ++r)
      for (int64_t g = 0; g < Hkv; ++g) {
        const int64_t at = ((r * Hkv + g) * capacity + column[r]) * D;
        std::memcpy(kc + at, kp + r * key.stride(0) + g * D, D * sizeof(float));
        std::memcpy(vc + at, vp + r * value.stride(0) + g * D, D * sizeof(float));
      }
    float* out = attended.data_ptr<float>();
    // Rows × KV heads over threads, unless the whole step's attention is too small to pay for a second thread.
    const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 16) / (G * D * (longest + 1)));
    parallel::host_parallel_for(0, R * Hkv, grain, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> scores;
      scores.resize(capacity);
      for (int64_t j = begin; j < end; ++j) {
        const int64_t r = j / Hkv, g = j % Hkv, cache = (r * Hkv + g) * capacity * D;
        k.attend(qp + r * q.stride(0) + g * G * D, G, kc + cache, vc + cache, column[r] + 1, D, scale,
                 out + r * H * D + g * G * D, scores.data());
      }
    });
    x.add_(proj_.attention_output(int64_t(i), attended));
    rms_norm(k, x, proj_.norm_weight(i, Norm::post_attention), eps, normed);
    x.add_(proj_.mlp(int64_t(i), parallel::tensor::copy_to_tp(normed, tp)));
  }
  rms_norm(k, x, model_.model->norm->weight, eps, normed);
  return normed;
}

}  // namespace hpcrl::rollout
