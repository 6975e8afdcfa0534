// RoPE tables and rotation (rope.h), following transformers' LlamaRotaryEmbedding
// and _compute_llama3_parameters so that converted checkpoints reproduce HF.
#include "hpcrl/model/rope.h"

#include <torch/utils.h>

#include <cmath>

#include "hpcrl/util/check.h"

namespace hpcrl::model {

at::Tensor llama3_scaled_inv_freq(const at::Tensor& inv_freq, const RopeScaling& s) {
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / s.low_freq_factor;
  const double high_freq_wavelen = old_len / s.high_freq_factor;
  at::Tensor wavelen = 2 * M_PI / inv_freq;
  // Long wavelengths (low frequencies) are slowed down by `factor`; short ones kept.
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  at::Tensor smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  at::Tensor blended = (1 - smooth) * scaled / s.factor + smooth * scaled;
  at::Tensor medium = (wavelen >= high_freq_wavelen) & (wavelen <= low_freq_wavelen);
  return at::where(medium, blended, scaled);
}

RotaryEmbedding::RotaryEmbedding(const ModelArch& arch, at::Device device) {
  const int64_t D = arch.head_dim;
  HPCRL_CHECK(D % 2 == 0, "RoPE needs an even head_dim, got " << D);
  // HF: 1 / base^(arange(0, D, 2).float() / D), in fp32.
  at::Tensor exponents = at::arange(0, D, 2, at::kLong).to(at::kFloat) / static_cast<double>(D);
  inv_freq_ = 1.0 / at::pow(arch.rope_theta, exponents);
  if (arch.rope_scaling.type == "llama3") inv_freq_ = llama3_scaled_inv_freq(inv_freq_, arch.rope_scaling);
  inv_freq_ = inv_freq_.to(at::kFloat).contiguous().to(device);
}

RopeTables RotaryEmbedding::tables(const at::Tensor& positions, at::ScalarType dtype) const {
  at::NoGradGuard no_grad;
  at::Tensor inv = inv_freq_.to(positions.device());
  at::Tensor freqs = positions.to(at::kFloat).unsqueeze(-1) * inv;  // [B, T, D/2]
  at::Tensor emb = at::cat({freqs, freqs}, -1);                     // [B, T, D]
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor apply_rotary(const at::Tensor& x, const RopeTables& rope) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  at::Tensor cos = rope.cos.unsqueeze(2), sin = rope.sin.unsqueeze(2);  // [B, T, 1, D]
  return x * cos + rotated * sin;
}

}  // namespace hpcrl::model
