// Forward-only pipelining: log-prob, value and teacher passes over many
// micro-batches, no autograd. Each rank runs its chunks' forwards in the
// schedule's forward order (gpipe/1f1b: micro-batch order; interleaved: groups
// of pp micro-batches chunk by chunk), sends each activation on and drops it
// as soon as the send completes, so a stage holds at most the activations
// still on the wire.
//
// The last chunk's result for each micro-batch (e.g. per-token log-probs
// [B_mb, T]) is broadcast over the pp group afterwards: every pp rank returns
// all m results, so the caller can use them wherever its loss runs (the last
// stage) or its data lives (the first).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/parallel/pipeline/schedule.h"

namespace hpcrl::parallel::pipeline {

struct ForwardOnlyStep {
  // input: the previous chunk's activation, undefined for chunk 0. Returns the
  // activation for the next chunk, or on the last chunk the micro-batch's result.
  std::function<at::Tensor(int microbatch, int chunk, const at::Tensor& input)> forward;
  // Receive buffer of a micro-batch's activation (e.g. empty [B_mb, T, C]).
  std::function<at::Tensor(int microbatch)> activation_buffer;
  // Receive buffer of a micro-batch's result on ranks without the last chunk (e.g. empty [B_mb, T] float32).
  std::function<at::Tensor(int microbatch)> result_buffer;
};

// Runs under no-grad. pp: the pipeline group (null or size 1: no communication).
// Returns the m results in micro-batch order on every pp rank.
std::vector<at::Tensor> run_forward_only(const dist::CommPtr& pp, const ForwardOnlyStep& step, int microbatches,
                                         Schedule schedule = Schedule::_1f1b, int virtual_stages = 1);

}  // namespace hpcrl::parallel::pipeline
