// The work–depth model of a decoder's forward pass, per token and per phase
// (docs/estimates.md): what `hpcrl plan --estimate` turns into seconds with a
// hardware profile. Counts follow Kaplan et al.'s convention — 2 FLOPs per
// multiply-add, attention over a context of m tokens costing 2·L·m·d_attn per
// token — with the projections counted from the architecture itself, so GQA
// (fewer k/v heads), gated MLPs (three matrices) and MoE (only the routed
// top-k experts and the shared one are active per token) come out right:
//
//   C_f(m) = 2·L·(P_attn + P_mlp,active + m·h·d_head) + 2·V·d
//
// which for a plain MHA model with a two-matrix MLP is the textbook
// 2L(4d² + 2d·d_ff + m·d) + 2Vd. Training a token costs ≈ 3·C_f (forward,
// and a backward twice as expensive), 4·C_f with activation checkpointing.
#pragma once

#include <cstdint>

#include "hpcrl/config/model_arch.h"

namespace hpcrl::cost {

// Multiply-adds per token of one layer's matrices.
int64_t attention_projection_params(const ModelArch& a);  // q, k, v, o (+ biases, q/k norms)
int64_t active_mlp_params(const ModelArch& a);            // gated MLP, or router + top-k + shared experts
int64_t attention_width(const ModelArch& a);              // h · d_head

// Forward FLOPs of one token attending to a context of `context` tokens;
// `lm_head`: the vocabulary projection is computed for this token.
double forward_flops_per_token(const ModelArch& a, double context, bool lm_head = true);

// A causal forward over `tokens` tokens of one sequence (context 1..tokens,
// mean (tokens + 1) / 2, which is exact since C_f is linear in m).
double sequence_forward_flops(const ModelArch& a, int64_t tokens, bool lm_head_every_token = true);

// One decode step of `batch` sequences, each with `context` tokens before it.
double decode_step_flops(const ModelArch& a, int64_t batch, double context);

// K and V of one sequence of `tokens` tokens over every layer: 2·tokens·L·d_kv·bytes.
double kv_cache_bytes(const ModelArch& a, int64_t tokens, int bytes_per_value);

// Weight bytes a forward reads (every parameter once: the routed experts of a
// MoE model are all read when the batch is large enough to touch each).
double weight_bytes(const ModelArch& a, int bytes_per_value);

// Training FLOPs of `tokens` tokens (sequences of `sequence` tokens): 3·C_f, or 4·C_f with checkpointing.
double training_flops(const ModelArch& a, int64_t tokens, int64_t sequence, bool activation_checkpointing);

}  // namespace hpcrl::cost
