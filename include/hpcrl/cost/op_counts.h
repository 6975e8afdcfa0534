// The work of a pass that is not a matrix product: element-wise and reduction
// ops (norms, rotary embedding, residual adds, activations, the attention
// scores' scale, mask and softmax, the layout copies around attention, the
// log-softmax over the vocabulary, the optimizer's update) and the number of
// ops launched. Matmuls run near the device's GEMM rate (work_depth.h); these
// ops run at its memory bandwidth and each pays a fixed launch/dispatch cost,
// which is what a model of matmul FLOPs alone misses, and misses the more the
// smaller the model (docs/estimates.md, "Measured").
//
// Counted from hpcrl's own layers (src/model/*.cpp, parallel/tensor/vocab_logprobs.cpp,
// optim/adamw.cpp), as values read + written per op, so the counts follow the
// code rather than an idealised fused kernel:
//   per layer and forward, for N tokens on the rank, widths per tp rank
//   (d hidden, q = heads·head_dim, kv = kv_heads·head_dim, I intermediate):
//     RMSNorm ×2 (pow, mean, scale, weight)       14·N·d
//     residual adds ×2                            6·N·d
//     rotary embedding of q and k                 10·N·(q + kv)
//     head-layout copies around attention          4·N·(q + kv)
//     SwiGLU: silu and the product                 5·N·I
//     attention scores (matmul output, scale,
//       mask, softmax, read by the second matmul)  9·S,  S = rows·heads·T·T_keys values
//   log-probs over the vocabulary (V/tp columns per token): 8·N·V forward
//     (max, shift, exp, sum, log, subtract), 6 more with the entropy; the
//     backward 4·N·V (+ 9 with the entropy)
//   a decode step: the layers for one token per sequence, the copy attention
//     makes of the strided KV cache (k and v, read and written), and sampling
//     (7 values per vocabulary entry per sequence)
//   a backward pass: kBackwardPerForward × the forward's values, and
//     kBackwardOpsPerForward × its ops (each forward op has a gradient node
//     doing one or two ops of the same size)
//   AdamW per parameter in fp32: on a GPU 108 B (nine tensor ops of the update, 92 B, and the
//     gradient clip and zeroing, 16 B); on a CPU 44 B (the fused pass reads weight, gradient and
//     moments once and writes three of them, 28 B, then the same 16 B)
//   the optimizer step's ops per parameter tensor, as algo/training/train_step.cpp's finish_step dispatches them
//     (each pays the profile's per-op cost; views, which launch nothing, are not counted):
//       the gradient norm (optim/grad_clip.cpp): to(double), pow, sum, item (a device-to-host read),
//         and the add into the host-side sum                                               5
//       the update (optim/adamw.cpp) as tensor ops (a GPU): weight decay mul_, exp_avg mul_ and add_,
//         exp_avg_sq mul_ and addcmul_, sqrt, div, add_ eps, addcdiv_                       9
//         or fused into one pass over the tensor (a dense fp32 CPU tensor)                  1
//       zero_grad's zero_                                                                   1
//     = 15 per tensor on a GPU, 7 on a CPU. Not counted: the clip's mul_ (only on a step whose norm
//     exceeds the limit), the master copy of a bf16 weight
#pragma once

#include <cstdint>

#include "hpcrl/config/model_arch.h"

namespace hpcrl::cost {

struct Layout;

// Bytes moved by non-matmul ops and the number of ops launched.
struct OpWork {
  double bytes = 0;
  double ops = 0;
  OpWork& operator+=(const OpWork& o) {
    bytes += o.bytes;
    ops += o.ops;
    return *this;
  }
  OpWork scaled(double bytes_factor, double ops_factor) const { return {bytes * bytes_factor, ops * ops_factor}; }
};

// Ops launched per layer and forward pass (norms, projections, rope, attention, activations, residuals, views).
constexpr int kOpsPerLayer = 56;
// Ops of a log-prob pass over the vocabulary (forward), and of its backward.
constexpr int kLogprobOps = 12, kLogprobBackwardOps = 8;
// Ops around the layers of a micro-batch: embedding, final norm, loss, masks, positions, bookkeeping.
constexpr int kOpsPerMicroBatch = 40;
// A backward pass moves about twice the forward's values and launches 1.5× its ops.
constexpr double kBackwardPerForward = 2.0, kBackwardOpsPerForward = 1.5;
// Ops of one decode step outside the layers (embedding, final norm, head, sampling, the engine's bookkeeping),
// and the values sampling reads and writes per vocabulary entry (temperature scale, softmax, the draw).
constexpr int kDecodeStepOps = 30;
constexpr double kSamplingValues = 7;
// AdamW reads/writes per parameter in fp32 (see the header comment) and the optimizer step's ops per
// parameter tensor (the gradient norm, the update, zero_grad; counted in the header comment): the update
// as tensor ops (ZeRO's shards on a GPU: one norm per parameter segment), and fused into one pass (CPU:
// optim/adamw.h). Plain AdamW on a GPU (optim/adamw_multi_tensor.h) dispatches a fixed number of ops for
// the whole set: per sharding kind (3) a _foreach_norm, a cast, a stack, a square, a division, a sum and a
// copy to the host (7); the clip's and zero_grad's _foreach call; the step tensor and the fused update (2).
constexpr double kAdamBytesPerParameter = 108, kAdamFusedBytesPerParameter = 44;
constexpr int kGradNormOpsPerTensor = 5, kZeroGradOpsPerTensor = 1;
constexpr int kOptimizerOpsPerTensor = kGradNormOpsPerTensor + 9 + kZeroGradOpsPerTensor;       // 15
constexpr int kFusedOptimizerOpsPerTensor = kGradNormOpsPerTensor + 1 + kZeroGradOpsPerTensor;  // 7
constexpr int kMultiTensorOptimizerOps = 3 * 7 + 1 + 1 + 2;                                    // 25 a step

// How the optimizer step runs (what the cost model charges): the CPU's fused per-tensor pass, one
// op per tensor and step (ZeRO's shards on a GPU), or the multi-tensor update (plain AdamW on a GPU).
enum class OptimizerKernel { kCpuPass, kTensorOps, kMultiTensor };
// The layers' non-matmul work of one forward over `rows` rows of `tokens` tokens each, attending to
// `keys` keys per query (= tokens for a forward over whole sequences), on one rank of `layout`.
OpWork layers_forward_ops(const ModelArch& a, const Layout& layout, double rows, double tokens, double keys,
                          int bytes_per_value);

// Log-probs over the vocabulary at `tokens` positions (all rows together) on one rank; `entropy`: the
// policy's entropy too; `backward`: and their gradient.
OpWork logprob_ops(const ModelArch& a, const Layout& layout, double tokens, bool entropy, bool backward);

// One decode step of `batch` sequences attending to `keys` cached keys: the layers (one token each) and the
// step's own ops. The cache is read through a strided view, which attention copies (k and v, read and written).
OpWork decode_step_ops(const ModelArch& a, const Layout& layout, double batch, double keys, int bytes_per_value);

// The AdamW update of `parameters` parameters in `tensors` tensors on one rank, run as `kernel`
// (kMultiTensor: the fused kernel's bytes, LibTorch 2.4+ as on the GPU machines measured).
OpWork optimizer_ops(double parameters, double tensors, OptimizerKernel kernel);

}  // namespace hpcrl::cost
