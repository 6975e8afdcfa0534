// The seconds of one phase on one rank of a role (a forward pass, a training
// step, a rollout), from the work–depth counts (work_depth.h), a roofline per
// phase and the layout's communication (comm_cost.h): compute-bound work runs
// at the profile's achievable FLOP/s, bandwidth-bound work (decode: the
// weights / tp and the KV cache read every step) at its achievable bytes/s,
// whichever takes longer, plus a fixed overhead per launched op; each parallel
// dimension adds its collectives (tp: two all-reduces of the activations per
// layer and pass; sp: four all-to-alls; ep: dispatch and combine per MoE layer;
// pp: the activations between stages and the bubble (p−1)/(m+p−1)).
#pragma once

#include <cstdint>
#include <string>

#include "hpcrl/config/model_arch.h"
#include "hpcrl/cost/hardware_profile.h"
#include "hpcrl/cost/op_counts.h"

namespace hpcrl::cost {

// A role's layout over its ranks (dp derived from the rank count, as the mesh does).
struct Layout {
  int64_t tp = 1, sp = 1, pp = 1, ep = 1, ranks = 1;
  int64_t dp() const { return ranks / (tp * sp * pp); }
  int64_t model_ranks() const { return tp * sp * pp; }
};

// What a phase costs and which bound decided it.
// Pieces (a decode step, a micro-batch) are added up each at its own bound:
// roofline_s = Σ max(matmul compute, weight/KV memory) over them; the non-matmul
// ops of a piece (op_counts.h) add their bytes at the element-wise bandwidth
// (elementwise_s) and their launches (overhead_s, each op at the profile's per-op cost:
// op_seconds(), train_op_seconds() in a training pass): on a device that runs ops as
// the host issues them (a CPU) all of it adds up; where launches are
// asynchronous (a GPU) a piece costs the larger of its work and its launches.
struct PhaseCost {
  double compute_s = 0, memory_s = 0;  // Σ of each bound alone (which one decided: bound())
  double roofline_s = 0, elementwise_s = 0, overhead_s = 0, comm_s = 0, bubble_s = 0;
  double flops = 0, bytes = 0, elementwise_bytes = 0, ops = 0, comm_bytes = 0;  // per rank
  double seconds() const { return roofline_s + elementwise_s + overhead_s + comm_s + bubble_s; }
  const char* bound() const;  // "compute" | "memory" | "elementwise" | "overhead" | "communication"
  // One piece: `flops` of matmuls and `bytes` of weights/KV at the profile's rates for a model of width
  // `width`, and the piece's non-matmul ops.
  void add_work(double piece_flops, double piece_bytes, const HardwareProfile& hw, double width,
                const OpWork& piece_ops = {});
  PhaseCost& operator+=(const PhaseCost& o);
};

// A no-grad forward over `sequences` sequences of `tokens` tokens each, per rank of `layout` (the role's dp
// share of them), computing logits at every position (log-probs, values) in micro-batches of `micro` rows.
PhaseCost forward_pass(const ModelArch& a, const Layout& layout, const HardwareProfile& hw, int64_t sequences,
                       int64_t tokens, int64_t micro, int bytes_per_value);

// The batch of one training phase: `sequences` (over all dp replicas) of `tokens` tokens each, in
// micro-batches of `micro` rows (0: one), with activation checkpointing (a recomputed forward) and the
// policy's entropy term where asked.
struct TrainingBatch {
  int64_t sequences = 0, tokens = 0, micro = 0;
  bool checkpointing = false, entropy = false;
};

// Forward + backward of `batch` on `layout` (per rank): compute, the non-matmul ops (log-probs with the
// entropy or without), tp/sp/ep/pp communication and the pipeline bubble.
PhaseCost training_pass(const ModelArch& a, const Layout& layout, const HardwareProfile& hw,
                        const TrainingBatch& batch, int bytes_per_value);

// Micro-batches per rank of `sequences` split over the layout's dp in `micro`-row micro-batches (0: one).
int64_t micro_batch_count(int64_t sequences, const Layout& layout, int64_t micro);

// The dp (× sp) gradient all-reduce of one optimizer step, as far as it shows after the backward:
// training all-reduces the gradients in buckets while the step's last backward runs (optim/grad_sync.h),
// so `overlap_s` of that backward hides as much, but never the last bucket, which is complete only
// when the backward ends. And the AdamW update of this rank's parameters.
// With optim.zero 1 the gradients are reduce-scattered once after the backward
// (nothing hides it); with zero 2 in buckets during every micro-batch's backward
// (`overlap_s` is then one micro-batch's backward, and the cost is paid
// micro_batches times: ZeRO-2 keeps no full gradient to accumulate into).
// bucket_bytes: optim.bucket_mb in bytes (0: its 8 MiB default).
// How a step's gradients are synchronised: behind `overlap_s` seconds of backward, by ZeRO stage
// `zero`, once per micro-batch of `micro_batches` at ZeRO-2/3, in buckets of `bucket_bytes` (0: the default).
struct GradientSyncShape {
  double overlap_s = 0;
  int zero = 0;
  int64_t micro_batches = 1;
  double bucket_bytes = 0;
};
PhaseCost gradient_sync(const ModelArch& a, const Layout& layout, const HardwareProfile& hw, int bytes_per_value,
                        const GradientSyncShape& shape = {});
PhaseCost optimizer_step(const ModelArch& a, const Layout& layout, const HardwareProfile& hw, int zero);

// Generation of `sequences` responses (mean `response` tokens, the longest `max_response`) after prompts
// of `prompt` tokens on one generation layout (pp = 1), with `max_batch` continuous-batching slots per
// replica: finished sequences free their slot for the next, so the full slots decode Σ tokens / slots
// steps, then the longest responses' tail (max − mean steps) runs alone. `group` samples share a prompt,
// which is prefilled once (the engine copies its KV cache to the group's other slots). Prefill and
// decode apart. `engine` describes a serving engine other than hpcrl's (a published run's).
struct RolloutShape {
  int64_t sequences = 0;      // responses generated, over all dp replicas
  int64_t prompt = 0;         // tokens per prompt
  int64_t response = 0;       // mean new tokens per response
  int64_t max_response = 0;   // new tokens of the longest response
  int64_t max_batch = 0;      // continuous-batching slots per replica; 0 = every sequence at once
  int64_t group = 1;          // samples per prompt
  // Multi-turn rollouts (docs/tools.md): tool calls per response, seconds per call, tokens per reply.
  double tool_calls = 0, tool_seconds = 0, reply_tokens = 0;
};
// With tool calls a response parks in its slot for tool_calls · tool_seconds, so on average a share
// p = c·L / (r·t + c·L) of the slots waits (r response tokens, t seconds a decode step at the live rows)
// and only slots · (1 − p) rows decode each step: a fixed point of the step's own cost, solved by
// iteration. Where a step costs the same at any row count (dispatch- or weight-bound), the calls add
// sequences · c · L / slots; where it costs per row (compute-bound), the other rows' decoding hides them.
// No response ends before its own r steps and c calls (the critical path), and each reply is prefilled
// into its row (one forward per call round of a slot-full). `tool_wait_s`: the decode time the calls added.
struct RolloutCost {
  PhaseCost prefill, decode;
  double tool_wait_s = 0;
};
struct EngineMode {
  // Each decode step is one replayed CUDA graph, whose kernels cost hw.graph_kernel_overhead_s each
  // instead of the eager per-op cost (precondition: the profile gives it).
  bool decode_graphs = false;
  // Responses still running at a weight sync are paused and finished in the next iteration (veRL's
  // partial_rollout, AReaL's interruptible generation), so no iteration waits for the longest one
  // alone: the tail's tokens are decoded at full slots with everyone else's.
  bool partial_rollouts = false;
};
RolloutCost rollout(const ModelArch& a, const Layout& layout, const HardwareProfile& hw, const RolloutShape& shape,
                    int bytes_per_value, EngineMode engine = {});

}  // namespace hpcrl::cost
