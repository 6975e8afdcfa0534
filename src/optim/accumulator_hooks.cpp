// Gradient-accumulator post-hooks (see accumulator_hooks.h).
#include "hpcrl/optim/accumulator_hooks.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "hpcrl/util/check.h"

namespace hpcrl::optim {

namespace {
struct ReadyHook : torch::autograd::FunctionPostHook {
  ReadyHook(std::shared_ptr<std::function<void(size_t)>> f, size_t index) : on_ready(std::move(f)), index(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    (*on_ready)(index);
    return outputs;
  }
  std::shared_ptr<std::function<void(size_t)>> on_ready;
  size_t index;
};
}  // namespace

AccumulatorHooks::AccumulatorHooks(const ParamSet& params, std::function<void(size_t)> on_ready) {
  auto shared = std::make_shared<std::function<void(size_t)>>(std::move(on_ready));
  for (size_t k = 0; k < params.size(); ++k) {
    auto acc = torch::autograd::impl::grad_accumulator(params[k].tensor);
    HPCRL_CHECK(acc, "parameter " << params[k].name << " is not a leaf that requires grad");
    uintptr_t key = acc->add_post_hook(std::make_unique<ReadyHook>(shared, k));
    hooks_.emplace_back(std::static_pointer_cast<void>(acc), key);
  }
}

AccumulatorHooks::~AccumulatorHooks() {
  for (auto& [acc, key] : hooks_) static_cast<torch::autograd::Node*>(acc.get())->del_post_hook(key);
}

}  // namespace hpcrl::optim
