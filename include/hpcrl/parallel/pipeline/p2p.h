// Point-to-point transfers between pipeline stages over the pp group:
// activations forward to the rank holding the next model chunk, gradients
// backward to the rank holding the previous one. Chunk c lives on pp rank
// c % pp, so with virtual stages the last rank's chunks feed rank 0's.
//
// No shapes travel: the receiver passes a buffer it allocated from what it
// already knows (the micro-batch's [B, T, C]), and a size mismatch is an error
// naming both sides. Each message is tagged with (direction, micro-batch,
// receiving chunk), so a receive matches exactly the message it wants whatever
// order the schedule issued them in.
//
// Sends are asynchronous and never block the schedule: the tensor is kept
// alive until MPI (or NCCL) is done with it, then released (forward-only
// passes free activations as soon as they are out). Receives block until the
// data is there — that wait is the pipeline bubble, traced as such. Every
// call is a span ("pp/send_forward", "pp/recv_forward", "pp/send_backward",
// "pp/recv_backward") on this stage's lane with args {bytes, microbatch, chunk}.
#pragma once

#include <ATen/ATen.h>

#include <deque>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::parallel::pipeline {

class StageLink {
 public:
  // pp: the pipeline group (size > 1); num_chunks: model chunks in all (pp · virtual stages).
  StageLink(dist::CommPtr pp, int num_chunks);
  ~StageLink();  // waits for sends still in flight

  // `output` of `chunk` for `microbatch` to the rank holding chunk + 1.
  void send_forward(const at::Tensor& output, int microbatch, int chunk);
  // Fills `input` (preallocated, its final shape) with the input of `chunk` from the rank holding chunk - 1.
  void recv_forward(at::Tensor& input, int microbatch, int chunk);
  // `input_grad` (gradient of chunk's input) to the rank holding chunk - 1.
  void send_backward(const at::Tensor& input_grad, int microbatch, int chunk);
  // Fills `output_grad` with the gradient of `chunk`'s output from the rank holding chunk + 1.
  void recv_backward(at::Tensor& output_grad, int microbatch, int chunk);

  // Blocks until every send has completed (end of a step: buffers are reusable).
  void wait_sends();
  int64_t sends_in_flight() const { return static_cast<int64_t>(in_flight_.size()); }

 private:
  int tag(int direction, int microbatch, int receiving_chunk) const;
  void send(const at::Tensor& t, int direction, int microbatch, int chunk, int to_chunk, const char* span);
  void recv(at::Tensor& t, int direction, int microbatch, int chunk, int from_chunk, const char* span);
  void release_completed();

  dist::CommPtr pp_;
  int num_chunks_;
  int lane_;
  std::deque<dist::WorkPtr> in_flight_;
};

}  // namespace hpcrl::parallel::pipeline
