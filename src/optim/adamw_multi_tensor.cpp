// AdamW over many tensors at once (see adamw_multi_tensor.h).
#include "hpcrl/optim/adamw_multi_tensor.h"

#include <torch/version.h>

#include <cmath>

#include "hpcrl/util/check.h"

#define HPCRL_HAS_FUSED_ADAMW \
  (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4))

namespace hpcrl::optim {

bool has_fused_adamw() { return HPCRL_HAS_FUSED_ADAMW; }

AdamWKernel adamw_kernel_for(const std::vector<at::Tensor>& weights) {
  bool all_cpu = true;
  for (const auto& w : weights) all_cpu = all_cpu && w.device().type() == at::kCPU;
  if (all_cpu) return AdamWKernel::kPerTensor;
  return has_fused_adamw() ? AdamWKernel::kFused : AdamWKernel::kMultiTensor;
}

const char* to_string(AdamWKernel kernel) {
  switch (kernel) {
    case AdamWKernel::kPerTensor: return "per-tensor";
    case AdamWKernel::kMultiTensor: return "multi-tensor";
    case AdamWKernel::kFused: return "fused";
  }
  return "?";
}

namespace {

// The gradients in the weights' dtype (a no-op where they match).
std::vector<at::Tensor> as_weight_dtype(const std::vector<at::Tensor>& w, const std::vector<at::Tensor>& g) {
  std::vector<at::Tensor> out;
  out.reserve(g.size());
  for (size_t i = 0; i < g.size(); ++i)
    out.push_back(g[i].scalar_type() == w[i].scalar_type() ? g[i] : g[i].to(w[i].scalar_type()));
  return out;
}

// adamw_update_with_ops, each of its nine ops applied to the whole list.
void multi_tensor_update(AdamWTensors& t, const std::vector<at::Tensor>& g, double lr, int64_t step,
                         const AdamWOptions& o) {
  std::vector<at::Tensor>& w = t.w;
  std::vector<at::Tensor>& m = t.m;
  std::vector<at::Tensor>& v = t.v;
  const double bc1 = 1.0 - std::pow(o.beta1, double(step));
  const double bc2_sqrt = std::sqrt(1.0 - std::pow(o.beta2, double(step)));
  if (o.weight_decay != 0.0) at::_foreach_mul_(w, 1.0 - lr * o.weight_decay);
  at::_foreach_mul_(m, o.beta1);
  at::_foreach_add_(m, g, 1.0 - o.beta1);
  at::_foreach_mul_(v, o.beta2);
  at::_foreach_addcmul_(v, g, g, 1.0 - o.beta2);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(v);
  at::_foreach_div_(denom, bc2_sqrt);
  at::_foreach_add_(denom, o.eps);
  at::_foreach_addcdiv_(w, m, denom, -lr / bc1);
}

void fused_update(AdamWTensors& t, const std::vector<at::Tensor>& g, double lr, int64_t step,
                  const AdamWOptions& o) {
#if HPCRL_HAS_FUSED_ADAMW
  std::vector<at::Tensor>& w = t.w;
  // The kernel reads the step from a float tensor on the weights' device, one per tensor.
  const at::Tensor step_t = at::full({}, double(step), w.front().options().dtype(at::kFloat));
  const std::vector<at::Tensor> steps(w.size(), step_t);
  at::_fused_adamw_(w, g, t.m, t.v, /*max_exp_avg_sqs=*/{}, steps, lr, o.beta1, o.beta2, o.weight_decay, o.eps,
                    /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)t, (void)g, (void)lr, (void)step, (void)o;
  HPCRL_CHECK(false, "AdamW: this LibTorch (" TORCH_VERSION ") has no _fused_adamw_ (2.4 or later)");
#endif
}

}  // namespace

void adamw_update_all(AdamWKernel kernel, AdamWTensors& t, double lr, int64_t step, const AdamWOptions& o) {
  const size_t n = t.w.size();
  HPCRL_CHECK(t.g.size() == n && t.m.size() == n && t.v.size() == n,
              "adamw_update_all: weights, gradients and moments differ in count");
  if (n == 0) return;
  switch (kernel) {
    case AdamWKernel::kPerTensor:
      for (size_t i = 0; i < n; ++i) adamw_update(t.w[i], t.g[i], t.m[i], t.v[i], lr, step, o);
      return;
    case AdamWKernel::kMultiTensor: return multi_tensor_update(t, as_weight_dtype(t.w, t.g), lr, step, o);
    case AdamWKernel::kFused: return fused_update(t, as_weight_dtype(t.w, t.g), lr, step, o);
  }
}

at::Tensor norms_of(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) return at::zeros({0}, at::kFloat);
  std::vector<at::Tensor> norms = at::_foreach_norm(tensors, 2);
  for (auto& n : norms) n = n.to(at::kFloat);
  return at::stack(norms);
}

}  // namespace hpcrl::optim
