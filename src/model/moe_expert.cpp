// SwiGLU expert (see the header). Kept apart from the dense MLP because its
// parameter names follow the MoE checkpoint layout and it never shards over tp.
#include "hpcrl/model/moe_expert.h"

#include <torch/utils.h>

namespace hpcrl::model {

ExpertProjNames expert_proj_names(const std::string& family) {
  if (family == "mixtral") return {"w1", "w3", "w2"};
  return {"gate_proj", "up_proj", "down_proj"};
}

Projection::Projection(int64_t in, int64_t out) { weight = register_parameter("weight", at::empty({out, in})); }

ExpertMlp::ExpertMlp(int64_t hidden, int64_t intermediate, const ExpertProjNames& names) {
  gate_proj = register_module(names.gate, std::make_shared<Projection>(hidden, intermediate));
  up_proj = register_module(names.up, std::make_shared<Projection>(hidden, intermediate));
  down_proj = register_module(names.down, std::make_shared<Projection>(intermediate, hidden));
}

at::Tensor ExpertMlp::forward(const at::Tensor& x) {
  at::Tensor h = at::silu(at::linear(x, gate_proj->weight)) * at::linear(x, up_proj->weight);  // [R, I]
  return at::linear(h, down_proj->weight);                                                  // [R, C]
}

void ExpertMlp::reset_parameters(at::Generator& gen, double std) {
  torch::NoGradGuard no_grad;
  gate_proj->weight.normal_(0.0, std, gen);
  up_proj->weight.normal_(0.0, std, gen);
  down_proj->weight.normal_(0.0, std, gen);
}

}  // namespace hpcrl::model
