// The eager step launcher (step_launcher.h), and the graph launcher's refusal
// in a build without a CUDA LibTorch (cuda_graph_launcher.cpp has the real one).
#include "rollout/step_launcher.h"

#include <spdlog/spdlog.h>

#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

namespace {
class EagerLauncher final : public StepLauncher {
 public:
  void launch(StepShape, const std::function<void()>& step) override { step(); }
};

// Why the steps of `model` run eagerly although graphs were asked for; empty when a graph can hold them.
std::string no_graph_reason(const model::DecoderModel& model) {
  if (!model.model->embed_tokens->weight.device().is_cuda()) return "the model is not on a CUDA device";
  if (model.parallel_context().tp_size() > 1) return "tp > 1 (the step's collectives are not captured)";
  if (model.arch().num_experts > 0) return "a mixture of experts routes on the host";
  return "";
}
}  // namespace

std::unique_ptr<StepLauncher> eager_step_launcher() { return std::make_unique<EagerLauncher>(); }

std::unique_ptr<StepLauncher> step_launcher_for(const model::DecoderModel& model, bool graphs) {
  if (!graphs) return eager_step_launcher();
  const std::string reason = no_graph_reason(model);
  if (reason.empty()) return graph_step_launcher(model.model->embed_tokens->weight.device());
  spdlog::info("decode_step: graphs runs the fixed steps eagerly here: {}", reason);
  return eager_step_launcher();
}

#ifndef HPCRL_TORCH_CUDA
std::unique_ptr<StepLauncher> graph_step_launcher(at::Device device) {
  HPCRL_CHECK_INPUT(false, "decode_step: graphs needs hpcrl built against a CUDA LibTorch (this build has none, and "
                           "the model is on " << device << "); use decode_step: fixed or dynamic");
  return nullptr;
}
#endif

}  // namespace hpcrl::rollout
