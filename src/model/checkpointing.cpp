// Activation checkpointing (checkpointing.h). The block function and the RNG
// states travel in a capsule in the autograd context; the backward recomputes
// the block under the forward's RNG state and runs a reentrant backward
// through it, exactly like torch.utils.checkpoint(use_reentrant=True).
#include "hpcrl/model/checkpointing.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/utils.h>

#ifdef HPCRL_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include <mutex>

#include "hpcrl/util/check.h"

namespace hpcrl::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// RNG state of the CPU generator and, for CUDA inputs, of the current device's generator.
struct RngState {
  at::Tensor cpu;
  at::Tensor cuda;
  int cuda_device = -1;

  static RngState capture(bool cuda) {
    RngState s;
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      s.cpu = gen.get_state();
    }
#ifdef HPCRL_TORCH_CUDA
    if (cuda) {
      s.cuda_device = at::cuda::current_device();
      auto gen = at::cuda::detail::getDefaultCUDAGenerator(s.cuda_device);
      std::lock_guard<std::mutex> lock(gen.mutex());
      s.cuda = gen.get_state();
    }
#else
    (void)cuda;
#endif
    return s;
  }

  void restore() const {
    {
      auto gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(cpu);
    }
#ifdef HPCRL_TORCH_CUDA
    if (cuda.defined()) {
      auto gen = at::cuda::detail::getDefaultCUDAGenerator(cuda_device);
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(cuda);
    }
#endif
  }
};

struct BlockHolder : torch::CustomClassHolder {
  CheckpointFn fn;
  RngState rng;
};

class CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const CheckpointFn& fn, at::TensorList inputs) {
    bool cuda = false;
    for (const auto& t : inputs) cuda = cuda || t.is_cuda();
    auto holder = c10::make_intrusive<BlockHolder>();
    holder->fn = fn;
    holder->rng = RngState::capture(cuda);
    ctx->saved_data["block"] = at::IValue::make_capsule(holder);
    ctx->save_for_backward(inputs.vec());
    return fn(inputs.vec());  // grad mode is off here: no activations are kept
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto holder = c10::static_intrusive_pointer_cast<BlockHolder>(ctx->saved_data["block"].toCapsule());
    variable_list inputs;
    for (const auto& t : ctx->get_saved_variables())
      inputs.push_back(t.detach().requires_grad_(t.requires_grad()));

    RngState now = RngState::capture(holder->rng.cuda.defined());
    holder->rng.restore();
    variable_list outputs;
    {
      at::AutoGradMode enable(true);
      outputs = holder->fn(inputs);
    }
    now.restore();

    variable_list roots, root_grads;
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i].requires_grad() && grads[i].defined()) {
        roots.push_back(outputs[i]);
        root_grads.push_back(grads[i]);
      }
    if (!roots.empty()) torch::autograd::backward(roots, root_grads);

    variable_list result{at::Tensor()};  // no gradient for the function argument
    for (const auto& in : inputs) result.push_back(in.requires_grad() ? in.grad() : at::Tensor());
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> checkpoint(const CheckpointFn& fn, const std::vector<at::Tensor>& inputs) {
  for (const auto& t : inputs) HPCRL_CHECK(t.defined(), "checkpoint inputs must be defined tensors");
  return CheckpointFunction::apply(fn, at::TensorList(inputs));
}

}  // namespace hpcrl::model
