// LoRA factors and the thread-local bypass switch (lora.h).
#include "hpcrl/parallel/tensor/lora.h"

#include <torch/utils.h>

#include "hpcrl/util/strings.h"

namespace hpcrl::parallel::tensor {

namespace {
thread_local bool bypassed = false;
}

LoraFactor::LoraFactor(const std::vector<int64_t>& local_shape, ShardSpec spec, double scale,
                       const at::TensorOptions& options)
    : spec_(spec), scale_(scale) {
  weight = register_parameter("weight", torch::zeros(local_shape, options));
}

AdaptersOff::AdaptersOff() : saved_(bypassed) { bypassed = true; }
AdaptersOff::~AdaptersOff() { bypassed = saved_; }
bool adapters_bypassed() { return bypassed; }

at::Tensor LoraAdapter::dropped(const at::Tensor& x, bool training) const {
  return training && shape.dropout > 0 ? at::dropout(x, shape.dropout, /*train=*/true) : x;
}

at::Tensor merge_lora(const at::Tensor& w, const at::Tensor& b, const at::Tensor& a, double scale) {
  return at::addmm(w.to(at::kFloat), b.to(at::kFloat), a.to(at::kFloat), /*beta=*/1, /*alpha=*/scale)
      .to(w.scalar_type());
}

bool is_lora_tensor(const std::string& name) {
  return str::ends_with(name, ".lora_A.weight") || str::ends_with(name, ".lora_B.weight");
}

}  // namespace hpcrl::parallel::tensor
