// The graph step launcher (step_launcher.h): one CUDA graph per step shape,
// captured at the shape's second use on a side stream (a capture cannot run on
// the default stream) into one shared memory pool, then replayed on the
// engine's stream. Compiled only in CUDA builds (HPCRL_TORCH_CUDA).
#ifdef HPCRL_TORCH_CUDA

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <exception>
#include <map>
#include <memory>
#include <set>

#include "hpcrl/util/check.h"
#include "rollout/step_launcher.h"

namespace hpcrl::rollout {

namespace {

class GraphLauncher final : public StepLauncher {
 public:
  explicit GraphLauncher(at::Device device) : device_(device), pool_(at::cuda::graph_pool_handle()) {}

  ~GraphLauncher() override {
    // Replays may still run on the stream: the graphs' memory goes back only after them. A device
    // error here (the run is already failing) must not end the process from a destructor.
    try {
      c10::cuda::device_synchronize();
    } catch (const std::exception&) {
    }
    graphs_.clear();
  }

  void launch(StepShape shape, const std::function<void()>& step) override {
    const c10::cuda::CUDAGuard on_device(device_);
    auto found = graphs_.find(shape);
    if (found != graphs_.end()) {
      found->second->replay();
      ++replays_;
      return;
    }
    if (warmed_.insert(shape).second) {  // first use: eager, on the stream it will be captured on
      on_side_stream(step);
      return;
    }
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    on_side_stream([&] {
      // Thread-local: another thread's CUDA calls (a communicator's, a tool's) do not break the capture.
      graph->capture_begin(pool_, cudaStreamCaptureModeThreadLocal);
      step();  // recorded, not run
      graph->capture_end();
    });
    ++captures_;
    graph->replay();  // this step's one run
    ++replays_;
    graphs_.emplace(shape, std::move(graph));
  }

 private:
  // Runs fn on the side stream, after everything queued before it and before anything queued after.
  void on_side_stream(const std::function<void()>& fn) {
    c10::cuda::device_synchronize();
    {
      const c10::cuda::CUDAStreamGuard guard(side_);
      fn();
    }
    c10::cuda::device_synchronize();
  }

  at::Device device_;
  at::cuda::MempoolId_t pool_;
  c10::cuda::CUDAStream side_ = c10::cuda::getStreamFromPool(false, device_.index());
  std::set<StepShape> warmed_;
  std::map<StepShape, std::unique_ptr<at::cuda::CUDAGraph>> graphs_;
};

}  // namespace

std::unique_ptr<StepLauncher> graph_step_launcher(at::Device device) {
  HPCRL_CHECK_INPUT(device.is_cuda(), "decode_step: graphs needs a model on a CUDA device, this one is on "
                                          << device << "; use decode_step: fixed or dynamic");
  return std::make_unique<GraphLauncher>(device);
}

}  // namespace hpcrl::rollout

#endif  // HPCRL_TORCH_CUDA
