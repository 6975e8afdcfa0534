// Value head (heads.h).
#include "hpcrl/model/heads.h"

#include <torch/utils.h>

namespace hpcrl::model {

ValueHead::ValueHead(int64_t hidden) { weight = register_parameter("weight", torch::zeros({1, hidden})); }

at::Tensor ValueHead::forward(const at::Tensor& hidden) {
  return at::linear(hidden, weight).squeeze(-1).to(at::kFloat);
}

}  // namespace hpcrl::model
