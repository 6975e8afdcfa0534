// Rotary position embeddings in HF's rotate-half layout: dimension i of a head
// is paired with i + D/2 and rotated by position · inv_freq[i], with
// inv_freq[i] = theta^(−2i/D), optionally rescaled the Llama-3 way (long
// wavelengths divided by `factor`, a smooth blend in between). Angles are
// computed in fp32 from explicit position ids, as HF does, so left-padded
// batches and KV-cache decoding use the same positions as training.
#pragma once

#include <ATen/ATen.h>

#include "hpcrl/config/model_arch.h"

namespace hpcrl::model {

struct RopeTables {
  at::Tensor cos;  // [B, T, D]
  at::Tensor sin;  // [B, T, D]
};

class RotaryEmbedding {
 public:
  // The inverse frequencies live on `device`, so tables() for positions there
  // copies nothing from the host (a CUDA graph captures no host copy).
  explicit RotaryEmbedding(const ModelArch& arch, at::Device device = at::kCPU);

  // positions: [B, T] int64 -> cos/sin tables in `dtype` on the positions' device.
  RopeTables tables(const at::Tensor& positions, at::ScalarType dtype) const;
  const at::Tensor& inv_freq() const { return inv_freq_; }  // [D/2] float32

 private:
  at::Tensor inv_freq_;
};

// x: [B, T, H, D] -> x·cos + rotate_half(x)·sin, with rotate_half(x) = [−x2, x1].
at::Tensor apply_rotary(const at::Tensor& x, const RopeTables& rope);

// Llama-3 rescaling of inverse frequencies (exposed for tests).
at::Tensor llama3_scaled_inv_freq(const at::Tensor& inv_freq, const RopeScaling& scaling);

}  // namespace hpcrl::model
