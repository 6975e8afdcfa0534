// One SwiGLU expert of an MoE layer: down(silu(gate(x)) * up(x)), no biases.
// Its three projections are registered under the names the checkpoint family
// uses (qwen2_moe: gate_proj/up_proj/down_proj, mixtral: w1/w3/w2), so the
// module's parameter names are the HF tensor names.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>

namespace hpcrl::model {

// A bias-free linear map holding one parameter, "weight" [out, in]. Unlike
// torch::nn::Linear it allocates without initialising, so building a block
// never consumes the global RNG (MoeBlock initialises from its own streams).
class Projection : public torch::nn::Module {
 public:
  Projection(int64_t in, int64_t out);
  at::Tensor forward(const at::Tensor& x) { return at::linear(x, weight); }  // [..., in] -> [..., out]
  at::Tensor weight;
};

struct ExpertProjNames {
  std::string gate, up, down;
};
// Projection names of the routed experts for an HF model_type ("mixtral": w1/w3/w2;
// every other family, including the shared expert: gate_proj/up_proj/down_proj).
ExpertProjNames expert_proj_names(const std::string& family);

class ExpertMlp : public torch::nn::Module {
 public:
  ExpertMlp(int64_t hidden, int64_t intermediate, const ExpertProjNames& names);

  at::Tensor forward(const at::Tensor& x);  // [R, C] -> [R, C]

  // Every weight ~ N(0, std²), drawn from `gen` in the order gate, up, down.
  void reset_parameters(at::Generator& gen, double std);

  std::shared_ptr<Projection> gate_proj;  // weight [I, C]
  std::shared_ptr<Projection> up_proj;    // weight [I, C]
  std::shared_ptr<Projection> down_proj;  // weight [C, I]
};

}  // namespace hpcrl::model
