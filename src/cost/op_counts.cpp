// Non-matmul work of forward, backward, decode and optimizer passes (op_counts.h).
#include "hpcrl/cost/op_counts.h"

#include "hpcrl/cost/phase_cost.h"

namespace hpcrl::cost {

namespace {
// The per-rank widths of one layer: heads and the MLP split over tp, k/v heads split when tp divides them.
struct LayerWidths {
  double d = 0, q = 0, kv = 0, intermediate = 0, heads = 0;
};

LayerWidths widths(const ModelArch& a, const Layout& l) {
  LayerWidths w;
  const double tp = double(l.tp);
  w.d = double(a.hidden_size);
  w.heads = double(a.num_heads) / tp;
  w.q = w.heads * double(a.head_dim);
  w.kv = double(a.num_kv_heads % l.tp == 0 ? a.num_kv_heads / l.tp : 1) * double(a.head_dim);
  const double mlp = a.num_experts > 0 ? double(a.experts_per_token * a.moe_intermediate_size +
                                                a.shared_expert_intermediate_size)
                                       : double(a.intermediate_size) / tp;
  w.intermediate = mlp;
  return w;
}
}  // namespace

OpWork layers_forward_ops(const ModelArch& a, const Layout& l, double rows, double tokens, double keys,
                          int bytes_per_value) {
  const LayerWidths w = widths(a, l);
  const double n = rows * tokens / double(l.sp);  // tokens on this rank
  // With Ulysses sp the attention itself sees all T tokens of heads / sp heads: the same score count.
  const double scores = rows * w.heads * tokens * keys / double(l.sp);
  const double values = 20 * n * w.d + 14 * n * (w.q + w.kv) + 5 * n * w.intermediate + 9 * scores;
  const double layers = double(a.num_layers) / double(l.pp);
  return {layers * values * bytes_per_value, layers * kOpsPerLayer};
}

OpWork logprob_ops(const ModelArch& a, const Layout& l, double tokens, bool entropy, bool backward) {
  const double cells = tokens / double(l.sp) * double(a.vocab_size) / double(l.tp);
  double values = 8 + (entropy ? 6 : 0);
  double ops = kLogprobOps;
  if (backward) values += 4 + (entropy ? 9 : 0), ops += kLogprobBackwardOps;
  return {values * cells * 4, ops};  // computed in fp32 whatever the model's dtype
}

OpWork decode_step_ops(const ModelArch& a, const Layout& l, double batch, double keys, int bytes_per_value) {
  OpWork w = layers_forward_ops(a, l, batch, 1, keys, bytes_per_value);
  const LayerWidths lw = widths(a, l);
  const double cache_copy = 2 * 2 * batch * keys * lw.kv * bytes_per_value;  // k and v, read and written
  w.bytes += double(a.num_layers) * cache_copy;
  w.bytes += kSamplingValues * batch * double(a.vocab_size) * 4;  // fp32 logits: scale, softmax, draw
  w.ops += kDecodeStepOps;
  return w;
}

OpWork optimizer_ops(double parameters, double tensors, OptimizerKernel kernel) {
  switch (kernel) {
    case OptimizerKernel::kCpuPass:
      return {parameters * kAdamFusedBytesPerParameter, tensors * kFusedOptimizerOpsPerTensor};
    case OptimizerKernel::kTensorOps: return {parameters * kAdamBytesPerParameter, tensors * kOptimizerOpsPerTensor};
    case OptimizerKernel::kMultiTensor: return {parameters * kAdamFusedBytesPerParameter, kMultiTensorOptimizerOps};
  }
  return {};
}

}  // namespace hpcrl::cost
