// Runs one pipelined training step on this pp rank: walks the schedule's
// passes (schedule.h), receives each forward's input and each backward's
// output gradient from the neighbouring stages (p2p.h), calls the model
// through one callback, and runs autograd for the backward passes.
//
// Model-agnostic: `forward` computes one model chunk on one micro-batch. On
// the last chunk it returns the micro-batch's loss, already scaled so that the
// sum over micro-batches is the step's loss (e.g. token sum / tokens in the
// whole batch, or mean / m): gradients then accumulate in .grad to exactly the
// un-pipelined full-batch gradients. Other chunks return their output
// activation and may add a local loss term (an MoE aux loss share).
//
// Gradients only accumulate; the data-parallel all-reduce, the tied-embedding
// sync and the optimizer step are the caller's, once, after run_pipeline.
//
// Each forward and backward is a span "pp/forward" / "pp/backward" on the
// stage's lane (trace::pipeline_lane(pp rank)) with args {microbatch, stage,
// chunk}, so Perfetto shows the schedule and its bubble per rank.
#pragma once

#include <ATen/ATen.h>

#include <functional>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/parallel/pipeline/schedule.h"

namespace hpcrl::parallel::pipeline {

struct ChunkOutput {
  at::Tensor output;  // activation for the next chunk (undefined on the last chunk)
  at::Tensor loss;    // scalar: the micro-batch's loss (last chunk) or a local loss term; may be undefined elsewhere
};

struct PipelineStep {
  // input: the previous chunk's activation (requires grad), undefined for chunk 0.
  std::function<ChunkOutput(int microbatch, int chunk, const at::Tensor& input)> forward;
  // An uninitialised tensor of the activation's shape, dtype and device for a
  // micro-batch (e.g. [B_mb, T, C]): the receive buffer of inputs and gradients.
  std::function<at::Tensor(int microbatch)> activation_buffer;
  // Optional: runs before each backward pass, once its gradient has arrived.
  // A trainer that reduces gradients during the backward (ZeRO-2/3) ends the
  // previous pass's reduction here, as it does before every micro-batch's
  // backward without a pipeline.
  std::function<void(int microbatch, int chunk)> before_backward;
};

struct PipelineOptions {
  Schedule schedule = Schedule::_1f1b;
  int microbatches = 1;
  int virtual_stages = 1;  // chunks per rank; > 1 only with interleaved_1f1b
};

struct PipelineStats {
  double loss = 0;        // sum of every chunk's loss terms over micro-batches, on every pp rank
  double step_s = 0;      // wall time of the step on this rank (first pass to last send done)
  double compute_s = 0;   // time inside forward and backward passes on this rank
  double idle_s() const { return step_s - compute_s; }
};

// pp: the pipeline group; null or size 1 runs the same passes without communication.
PipelineStats run_pipeline(const dist::CommPtr& pp, const PipelineStep& step, const PipelineOptions& options);

}  // namespace hpcrl::parallel::pipeline
