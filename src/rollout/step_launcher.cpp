// The eager step launcher (step_launcher.h), and the graph launcher's refusal
// in a build without a CUDA LibTorch (cuda_graph_launcher.cpp has the real one).
#include "rollout/step_launcher.h"

#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

namespace {
class EagerLauncher final : public StepLauncher {
 public:
  void launch(StepShape, const std::function<void()>& step) override { step(); }
};
}  // namespace

std::unique_ptr<StepLauncher> eager_step_launcher() { return std::make_unique<EagerLauncher>(); }

#ifndef HPCRL_TORCH_CUDA
std::unique_ptr<StepLauncher> graph_step_launcher(at::Device device) {
  HPCRL_CHECK_INPUT(false, "decode_step: graphs needs hpcrl built against a CUDA LibTorch (this build has none, and "
                           "the model is on " << device << "); use decode_step: fixed or dynamic");
  return nullptr;
}
#endif

}  // namespace hpcrl::rollout
