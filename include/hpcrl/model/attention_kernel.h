// The attention computation itself — softmax(q kᵀ / sqrt(D) + mask) v — in the
// one file that knows which LibTorch it is built against: a fused
// at::scaled_dot_product_attention from LibTorch 2.0 (flash / memory-efficient
// kernels on GPU; native grouped-query support from 2.5, repeated KV heads
// before it), and an explicit fp32-softmax path on LibTorch 1.13.
#pragma once

#include <ATen/ATen.h>

namespace hpcrl::model {

// Which keys each query may attend to. key_segments: [B, Tk] segment ids, 0 =
// padding (a bool/0-1 mask is the one-segment case), or undefined (all valid).
// Packed rows (algo/training/micro_batches.h) hold several sequences numbered 1, 2, ...;
// a query sees only keys of its own sequence. Queries are the last Tq of the Tk
// positions (the first Tk − Tq are cached). Query i sees keys j ≤ Tk − Tq + i
// whose segment is its own and non-zero; a query with no visible key (a padding
// query) sees itself, so no softmax row is empty and nothing turns into NaN.
// Returns [B, 1, Tq, Tk] bool, or undefined for plain causal (no padding, Tq == Tk).
at::Tensor attention_mask(const at::Tensor& key_segments, int64_t tq, int64_t tk);

// q: [B, H, Tq, D]; k, v: [B, Hkv, Tk, D] with H % Hkv == 0 (query head h uses
// key/value head h / (H / Hkv)); allowed: from attention_mask(). -> [B, H, Tq, D]
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed);

// The same maths without any fused kernel (what LibTorch 1.13 runs); tests
// compare the fused path against it.
at::Tensor attend_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed);

}  // namespace hpcrl::model
