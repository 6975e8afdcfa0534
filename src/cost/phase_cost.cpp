// Per-rank seconds of forward, training and generation phases (phase_cost.h).
#include "hpcrl/cost/phase_cost.h"

#include <algorithm>
#include <cmath>

#include "hpcrl/cost/comm_cost.h"
#include "hpcrl/cost/op_counts.h"
#include "hpcrl/cost/work_depth.h"

namespace hpcrl::cost {

namespace {
// GradSync's bucket (optim/grad_sync.h): the last one is all-reduced after the backward.
constexpr double kDefaultGradBucketBytes = double(8u << 20);  // optim.bucket_mb's default
int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

// Parameter tensors per layer (four attention projections, three MLP matrices, two norms).
constexpr int kTensorsPerLayer = 9;

// The per-layer collectives of `passes` passes (1: forward, 3: forward + backward) over `tokens`
// tokens of one micro-batch on this rank (after the sp split).
void add_layer_comm(PhaseCost& c, const ModelArch& a, const Layout& l, const HardwareProfile& hw, double tokens,
                    int passes, int bytes_per_value) {
  const double act = tokens * double(a.hidden_size) * bytes_per_value;  // [tokens, d] activations
  const double layers = double(a.num_layers) / double(l.pp);
  const int gpn = hw.gpus_per_node;
  const int64_t backward = passes > 1 ? 2 : 1;  // the backward repeats the forward's collectives
  auto add = [&](double seconds, double bytes) {
    c.comm_s += seconds * layers * double(backward);
    c.comm_bytes += bytes * layers * double(backward);
  };
  if (l.tp > 1) add(2 * all_reduce_seconds(act, l.tp, hw.link(crosses_nodes(l.tp, 1, gpn))), 2 * act);
  if (l.sp > 1) add(4 * all_to_all_seconds(act, l.sp, hw.link(crosses_nodes(l.sp, l.tp, gpn))), 4 * act);
  if (l.ep > 1 && a.num_experts > 0) {
    const double routed = act * double(a.experts_per_token);
    add(2 * all_to_all_seconds(routed, l.ep, hw.link(crosses_nodes(l.ep, l.tp, gpn))), 2 * routed);
  }
}

// Activations between pipeline stages: one send per micro-batch and direction.
void add_pipeline_comm(PhaseCost& c, const ModelArch& a, const Layout& l, const HardwareProfile& hw, double tokens,
                       int64_t micro_batches, int directions, int bytes_per_value) {
  if (l.pp <= 1) return;
  const double act = tokens * double(a.hidden_size) * bytes_per_value;
  const Link link = hw.link(crosses_nodes(l.pp, l.tp * l.sp * l.dp(), hw.gpus_per_node)).p2p();
  c.comm_s += double(micro_batches * directions) * send_seconds(act, link);
  c.comm_bytes += double(micro_batches * directions) * act;
}
}  // namespace

void PhaseCost::add_work(double piece_flops, double piece_bytes, const HardwareProfile& hw, double width,
                         const OpWork& piece_ops) {
  const double compute = piece_flops / hw.flops_at(width), memory = piece_bytes / hw.bandwidth();
  const double elementwise = piece_ops.bytes / hw.elementwise_bandwidth();
  const double launches = piece_ops.ops * hw.op_seconds();  // measured end to end where the profile has it
  flops += piece_flops;
  bytes += piece_bytes;
  elementwise_bytes += piece_ops.bytes;
  ops += piece_ops.ops;
  compute_s += compute;
  memory_s += memory;
  roofline_s += std::max(compute, memory);
  elementwise_s += elementwise;
  // Asynchronous launches hide behind the work they queue; only what exceeds it shows.
  overhead_s += hw.async_launch ? std::max(0.0, launches - std::max(compute, memory) - elementwise) : launches;
}

const char* PhaseCost::bound() const {
  const double work = std::max(compute_s, memory_s);
  if (comm_s > work && comm_s > overhead_s && comm_s > elementwise_s) return "communication";
  if (overhead_s > work && overhead_s > elementwise_s) return "overhead";
  if (elementwise_s > work) return "elementwise";
  return compute_s >= memory_s ? "compute" : "memory";
}

PhaseCost& PhaseCost::operator+=(const PhaseCost& o) {
  compute_s += o.compute_s;
  memory_s += o.memory_s;
  roofline_s += o.roofline_s;
  elementwise_s += o.elementwise_s;
  elementwise_bytes += o.elementwise_bytes;
  ops += o.ops;
  overhead_s += o.overhead_s;
  comm_s += o.comm_s;
  bubble_s += o.bubble_s;
  flops += o.flops;
  bytes += o.bytes;
  comm_bytes += o.comm_bytes;
  return *this;
}

PhaseCost forward_pass(const ModelArch& a, const Layout& l, const HardwareProfile& hw, int64_t sequences,
                       int64_t tokens, int64_t micro, int bytes_per_value) {
  PhaseCost c;
  const int64_t local = ceil_div(sequences, l.dp());
  if (local == 0 || tokens == 0) return c;
  const int64_t rows = micro > 0 ? std::min(micro, local) : local, n_micro = micro_batch_count(sequences, l, micro);
  const double shard = double(l.model_ranks());
  for (int64_t m = 0; m < n_micro; ++m) {
    const int64_t b = std::min(rows, local - m * rows);
    OpWork ops = layers_forward_ops(a, l, double(b), double(tokens), double(tokens), bytes_per_value);
    ops += logprob_ops(a, l, double(b * tokens), false, false);
    ops.ops += kOpsPerMicroBatch;
    c.add_work(double(b) * sequence_forward_flops(a, tokens) / shard,
               weight_bytes(a, bytes_per_value) / double(l.tp * l.pp), hw, double(a.hidden_size), ops);
    add_layer_comm(c, a, l, hw, double(b * tokens) / double(l.sp), 1, bytes_per_value);
  }
  add_pipeline_comm(c, a, l, hw, double(rows * tokens) / double(l.sp), n_micro, 1, bytes_per_value);
  c.bubble_s = double(l.pp - 1) / double(n_micro) * (c.roofline_s + c.elementwise_s + c.overhead_s);
  return c;
}

PhaseCost training_pass(const ModelArch& a, const Layout& l, const HardwareProfile& hw, const TrainingBatch& batch,
                        int bytes_per_value) {
  const int64_t sequences = batch.sequences, tokens = batch.tokens, micro = batch.micro;
  const bool checkpointing = batch.checkpointing, entropy = batch.entropy;
  PhaseCost c;
  const int64_t local = ceil_div(sequences, l.dp());
  if (local == 0 || tokens == 0) return c;
  const int64_t rows = micro > 0 ? std::min(micro, local) : local, n_micro = micro_batch_count(sequences, l, micro);
  const double shard = double(l.model_ranks()), passes = checkpointing ? 4 : 3;
  // Its ops are recorded for autograd and have a backward: each costs the profile's training op.
  HardwareProfile train_hw = hw;
  train_hw.eager_op_s = hw.train_op_seconds();
  for (int64_t m = 0; m < n_micro; ++m) {
    const int64_t b = std::min(rows, local - m * rows);
    const OpWork layers = layers_forward_ops(a, l, double(b), double(tokens), double(tokens), bytes_per_value);
    OpWork ops = layers;  // forward, (the recomputed forward,) backward
    if (checkpointing) ops += layers;
    ops += layers.scaled(kBackwardPerForward, kBackwardOpsPerForward);
    ops += logprob_ops(a, l, double(b * tokens), entropy, true);
    ops.ops += kOpsPerMicroBatch;
    // The weights are read by the forward and twice by the backward, and the gradients written.
    c.add_work(training_flops(a, b * tokens, tokens, checkpointing) / shard,
               (passes + 1) * weight_bytes(a, bytes_per_value) / double(l.tp * l.pp), train_hw, double(a.hidden_size),
               ops);
    add_layer_comm(c, a, l, hw, double(b * tokens) / double(l.sp), checkpointing ? 4 : 3, bytes_per_value);
  }
  add_pipeline_comm(c, a, l, hw, double(rows * tokens) / double(l.sp), n_micro, 2, bytes_per_value);
  // 1F1B: (p−1) micro-batch slots idle.
  c.bubble_s = double(l.pp - 1) / double(n_micro) * (c.roofline_s + c.elementwise_s + c.overhead_s);
  return c;
}

int64_t micro_batch_count(int64_t sequences, const Layout& l, int64_t micro) {
  const int64_t local = ceil_div(sequences, l.dp());
  if (local == 0) return 0;
  return ceil_div(local, micro > 0 ? std::min(micro, local) : local);
}

PhaseCost gradient_sync(const ModelArch& a, const Layout& l, const HardwareProfile& hw, int bytes_per_value,
                        const GradientSyncShape& shape) {
  const double overlap_s = shape.overlap_s, bucket_bytes = shape.bucket_bytes;
  const int zero = shape.zero;
  const int64_t micro_batches = shape.micro_batches;
  PhaseCost c;
  const int64_t group = l.dp() * l.sp;  // gradients are summed over the data and the sequence shards
  const double grads = weight_bytes(a, bytes_per_value) / double(l.tp * l.pp);
  const Link& link = hw.link(crosses_nodes(group, l.tp, hw.gpus_per_node));
  const double bucket = std::min(grads, bucket_bytes > 0 ? bucket_bytes : kDefaultGradBucketBytes);
  if (zero == 0) {  // all-reduced in buckets behind the last micro-batch's backward
    c.comm_s = std::max(all_reduce_seconds(bucket, group, link), all_reduce_seconds(grads, group, link) - overlap_s);
  } else if (zero == 1) {  // one reduce-scatter after the backward
    c.comm_s = reduce_scatter_seconds(grads, group, link);
  } else {  // reduce-scattered in buckets behind every micro-batch's backward
    const double one = std::max(reduce_scatter_seconds(bucket, group, link),
                                reduce_scatter_seconds(grads, group, link) - overlap_s);
    c.comm_s = double(std::max<int64_t>(micro_batches, 1)) * one;
  }
  c.comm_bytes = group > 1 ? grads * (zero >= 2 ? double(std::max<int64_t>(micro_batches, 1)) : 1.0) : 0;
  if (zero == 3 && group > 1) {  // the parameters all-gathered for every micro-batch's forward and backward
    const double gathers = 2.0 * double(std::max<int64_t>(micro_batches, 1));
    c.comm_s += gathers * std::max(all_gather_seconds(grads / double(std::max<int64_t>(a.num_layers, 1)), group, link),
                                   all_gather_seconds(grads, group, link) - overlap_s);
    c.comm_bytes += gathers * grads;
  }
  return c;
}

PhaseCost optimizer_step(const ModelArch& a, const Layout& l, const HardwareProfile& hw, int zero) {
  PhaseCost c;
  const double params = double(a.num_parameters()) / double(l.tp * l.pp);
  const bool sharded = zero >= 1;
  const double owned = sharded ? params / double(l.dp()) : params;
  const double tensors = double(a.num_layers * kTensorsPerLayer) / double(l.pp) + 3;
  // A synchronous-launch profile is a CPU, where adamw_update runs its fused pass; on a GPU plain
  // AdamW updates the whole set at once, ZeRO its flat shards with a norm per parameter segment.
  const OptimizerKernel kernel = !hw.async_launch ? OptimizerKernel::kCpuPass
                                 : sharded        ? OptimizerKernel::kTensorOps
                                                  : OptimizerKernel::kMultiTensor;
  c.add_work(owned * 12.0, 0, hw, double(a.hidden_size), optimizer_ops(owned, tensors, kernel));  // ~12 FLOPs an element
  if (sharded && zero < 3 && l.dp() > 1) {  // the updated shards are gathered back (ZeRO-3: by the next forward)
    const Link& link = hw.link(crosses_nodes(l.dp(), l.tp * l.sp, hw.gpus_per_node));
    c.comm_s = all_gather_seconds(params * 4, l.dp(), link);
    c.comm_bytes = params * 4;
  }
  return c;
}

namespace {
// One decode step of `batch` sequences at `context` tokens each, reading `weights` bytes of this rank's shard.
void add_decode_step(PhaseCost& c, const ModelArch& a, const Layout& l, const HardwareProfile& hw, int64_t batch,
                     int64_t context, double weights, int bytes_per_value) {
  const double kv = double(batch) * kv_cache_bytes(a, context, bytes_per_value) / double(l.tp);
  const double logits = double(batch) * double(a.vocab_size) * 4 * 3;  // written, then read twice to sample
  c.add_work(decode_step_flops(a, batch, double(context)) / double(l.tp), weights + kv + logits, hw,
             double(a.hidden_size), decode_step_ops(a, l, double(batch), double(context + 1), bytes_per_value));
  add_layer_comm(c, a, l, hw, double(batch), 1, bytes_per_value);
}
}  // namespace

namespace {
// Seconds of one decode step of `rows` live rows (a fraction of a row is costed as that many rows' work).
double decode_step_seconds(const ModelArch& a, const Layout& l, const HardwareProfile& hw, double rows,
                           int64_t context, double weights, int bytes_per_value) {
  PhaseCost one;
  add_decode_step(one, a, l, hw, std::max<int64_t>(1, int64_t(std::ceil(rows))), context, weights, bytes_per_value);
  return one.seconds();
}

// Multi-turn rollouts' full-slot decode (RolloutCost's comment): every step at the live rows' fixed point;
// and the replies' prefill forwards. Returns the seconds the same steps take without the calls.
double add_tool_turns(RolloutCost& r, const ModelArch& a, const Layout& l, const HardwareProfile& hw,
                      const RolloutShape& shape, int64_t local, int64_t slots, double weights, int bytes_per_value) {
  const double c = shape.tool_calls, wait = shape.tool_calls * shape.tool_seconds;
  const int64_t context = shape.prompt + shape.response / 2;
  const int64_t tokens = local * shape.response;
  const double full_step = decode_step_seconds(a, l, hw, double(slots), context, weights, bytes_per_value);
  double live = double(slots), step = full_step;
  for (int i = 0; i < 50 && wait > 0; ++i) {
    const double parked = wait / (double(shape.response) * step + wait);
    live = std::max(1.0, double(slots) * (1 - parked));
    step = decode_step_seconds(a, l, hw, live, context, weights, bytes_per_value);
  }
  const int64_t rows = int64_t(std::ceil(live));
  for (int64_t t = 0; t < ceil_div(tokens, rows); ++t) add_decode_step(r.decode, a, l, hw, rows, context, weights, bytes_per_value);
  // Replies: c rounds of one prefill forward per slot-full, each reply's tokens once.
  const double rounds = c * double(ceil_div(local, slots));
  OpWork ops = layers_forward_ops(a, l, double(slots), shape.reply_tokens, double(context), bytes_per_value);
  ops.ops = rounds * (ops.ops + kOpsPerMicroBatch);
  r.prefill.add_work(double(local) * c * sequence_forward_flops(a, int64_t(shape.reply_tokens), false) / double(l.tp),
                     rounds * weights, hw, double(a.hidden_size), ops);
  return double(ceil_div(tokens, slots)) * full_step;
}
}  // namespace

RolloutCost rollout(const ModelArch& a, const Layout& l, const HardwareProfile& hw, const RolloutShape& shape,
                    int bytes_per_value, EngineMode engine) {
  const int64_t sequences = shape.sequences, prompt = shape.prompt, response = shape.response;
  const int64_t max_response = shape.max_response, max_batch = shape.max_batch, group = shape.group;
  RolloutCost r;
  const int64_t local = ceil_div(sequences, l.dp());
  if (local == 0) return r;
  const int64_t slots = std::min(local, max_batch > 0 ? max_batch : local);
  const double weights = weight_bytes(a, bytes_per_value) / double(l.tp);
  const int64_t full_steps = ceil_div(local * response, slots);
  // Prefill: one row per distinct prompt (a group's samples share it), the first slot-full at once,
  // then a prefill call at each decode step that frees a slot while sequences wait: one per waiting
  // sequence, or one per step when more than one finishes a step.
  const int64_t waiting = local - slots;
  const int64_t calls = 1 + (waiting > 0 ? std::min(waiting, ceil_div(waiting * std::max<int64_t>(response, 1), slots)) : 0);
  const double rows = double(ceil_div(local, std::max<int64_t>(group, 1)));
  OpWork ops = layers_forward_ops(a, l, rows, double(prompt), double(prompt), bytes_per_value);
  ops.ops = double(calls) * (ops.ops + kOpsPerMicroBatch);
  r.prefill.add_work(rows * sequence_forward_flops(a, prompt, false) / double(l.tp), double(calls) * weights, hw,
                     double(a.hidden_size), ops);
  add_layer_comm(r.prefill, a, l, hw, rows * double(prompt), 1, bytes_per_value);
  // A captured step replays its kernels back to back: each still pays a launch gap and the shortest
  // kernel's duration, but none pays the host's dispatch.
  HardwareProfile step_hw = hw;
  if (engine.decode_graphs) step_hw.kernel_overhead_s = hw.graph_kernel_overhead_s, step_hw.eager_op_s = 0;
  double without_calls = 0;  // with tools: the full-slot steps' seconds had no row waited for a call
  if (shape.tool_calls > 0) {
    without_calls = add_tool_turns(r, a, l, step_hw, shape, local, slots, weights, bytes_per_value);
  } else {
    for (int64_t t = 0; t < full_steps; ++t)  // slots refilled: each sequence is on average half-way through
      add_decode_step(r.decode, a, l, step_hw, slots, prompt + response / 2, weights, bytes_per_value);
  }
  const double full_slots = r.decode.seconds();
  if (!engine.partial_rollouts)
    for (int64_t t = response; t < std::max(response, max_response); ++t)
      add_decode_step(r.decode, a, l, step_hw, 1, prompt + t, weights, bytes_per_value);
  if (shape.tool_calls <= 0) return r;
  const double tail = r.decode.seconds() - full_slots;
  // No response ends before its own steps (a lone row's) and its calls, one after another.
  const double path = double(std::max(response, max_response)) *
                          decode_step_seconds(a, l, step_hw, 1, prompt + response / 2, weights, bytes_per_value) +
                      shape.tool_calls * shape.tool_seconds;
  if (r.decode.seconds() < path) r.decode.overhead_s += path - r.decode.seconds();
  // (Instant calls add none; the sums' rounding would leave a trace.)
  r.tool_wait_s = shape.tool_seconds > 0 ? std::max(0.0, r.decode.seconds() - (without_calls + tail)) : 0.0;
  return r;
}

}  // namespace hpcrl::cost
