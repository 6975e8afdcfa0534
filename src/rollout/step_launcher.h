// How the fixed decode step (fixed_decode_step.h) is launched: eagerly, or
// captured as CUDA graphs and replayed. The step is the same function either
// way — a fixed-shape computation over device buffers that the host never
// reads inside — so what a graph replays is what the eager launcher runs, and
// the eager one is how the step's logic is tested on the CPU. Private to the engine.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "hpcrl/model/decoder_model.h"

namespace hpcrl::rollout {

// One step's shape: rows padded to a bucket, cache columns read up to a
// bucket; for a fixed prefill (fixed_prefill.h) the sequences' bucket, the
// prompt positions' bucket and the distinct prompts' bucket (0 for a decode step).
struct StepShape {
  int64_t rows = 0, keys = 0, prompts = 0;
  bool operator<(const StepShape& o) const {
    if (rows != o.rows) return rows < o.rows;
    return keys != o.keys ? keys < o.keys : prompts < o.prompts;
  }
};

class StepLauncher {
 public:
  virtual ~StepLauncher() = default;
  // Runs `step` once, for its `shape`: its effects are those of one eager call.
  virtual void launch(StepShape shape, const std::function<void()>& step) = 0;
  int64_t captures() const { return captures_; }  // graphs captured
  int64_t replays() const { return replays_; }    // steps run by a replay

 protected:
  int64_t captures_ = 0, replays_ = 0;
};

// Calls the step.
std::unique_ptr<StepLauncher> eager_step_launcher();

// The launcher of `model`'s fixed steps: graphs when asked for and a graph can
// hold the steps (a CUDA model, tp = 1, no experts), else eager — and then,
// when graphs were asked for, the log says why.
std::unique_ptr<StepLauncher> step_launcher_for(const model::DecoderModel& model, bool graphs);

// One CUDA graph per shape on `device`, sharing one memory pool: a shape's
// first step runs eagerly (the warm-up: lazy initialisations and allocations
// happen outside a capture), its second is captured and replayed, every later
// one replayed. The graphs and their pool are freed with the launcher; they
// read every buffer where it was at capture, so the launcher must not outlive
// the buffers and weights the step reads (the engine makes one per call).
// Only in a CUDA build (InputError elsewhere: cuda_graph_launcher.cpp).
std::unique_ptr<StepLauncher> graph_step_launcher(at::Device device);

}  // namespace hpcrl::rollout
