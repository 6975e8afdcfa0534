// Stage-to-stage transfers (p2p.h). Tags: MPI guarantees tags up to 32767, so
// (direction, micro-batch, chunk) is folded modulo that range; two messages
// could only be confused if ~16k transfers between one pair of ranks were in
// flight at once. NCCL ignores tags and matches in issue order, which the
// schedules keep consistent between neighbours.
#include "hpcrl/parallel/pipeline/p2p.h"

#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::parallel::pipeline {

namespace {
constexpr int kForward = 0, kBackward = 1;
constexpr int kTagRange = 32767;  // [0, kTagRange) stays inside MPI's guaranteed tag bound
}  // namespace

StageLink::StageLink(dist::CommPtr pp, int num_chunks) : pp_(std::move(pp)), num_chunks_(num_chunks) {
  HPCRL_CHECK(pp_ && pp_->size() > 1, "StageLink needs a pp group of more than one rank");
  HPCRL_CHECK(num_chunks_ >= pp_->size() && num_chunks_ % pp_->size() == 0,
              num_chunks_ << " model chunks do not spread evenly over pp=" << pp_->size());
  lane_ = trace::pipeline_lane(pp_->rank());
}

StageLink::~StageLink() {
  try {
    wait_sends();
  } catch (...) {
    // A failed send already failed the step that issued it; a destructor must not throw.
  }
}

int StageLink::tag(int direction, int microbatch, int receiving_chunk) const {
  const int64_t id = (int64_t{microbatch} * num_chunks_ + receiving_chunk) * 2 + direction;
  return static_cast<int>(id % kTagRange);
}

void StageLink::send(const at::Tensor& t, int direction, int microbatch, int chunk, int to_chunk, const char* span) {
  HPCRL_CHECK(to_chunk >= 0 && to_chunk < num_chunks_, span << ": chunk " << chunk << " has no neighbour chunk "
                                                            << to_chunk << " (" << num_chunks_ << " chunks)");
  at::Tensor buf = t.detach().contiguous();
  trace::ScopedSpan s(span, {{"bytes", double(buf.nbytes())}, {"microbatch", microbatch}, {"chunk", chunk}}, lane_);
  const int peer = to_chunk % pp_->size();
  in_flight_.push_back(pp_->send_async(buf, peer, tag(direction, microbatch, to_chunk)));
  release_completed();
}

void StageLink::recv(at::Tensor& t, int direction, int microbatch, int chunk, int from_chunk, const char* span) {
  HPCRL_CHECK(from_chunk >= 0 && from_chunk < num_chunks_, span << ": chunk " << chunk << " has no neighbour chunk "
                                                                << from_chunk << " (" << num_chunks_ << " chunks)");
  HPCRL_CHECK(t.is_contiguous(), span << " needs a contiguous preallocated buffer, got strides " << t.strides());
  trace::ScopedSpan s(span, {{"bytes", double(t.nbytes())}, {"microbatch", microbatch}, {"chunk", chunk}}, lane_);
  const int peer = from_chunk % pp_->size();
  pp_->recv_async(t, peer, tag(direction, microbatch, chunk))->wait();
}

void StageLink::send_forward(const at::Tensor& output, int microbatch, int chunk) {
  send(output, kForward, microbatch, chunk, chunk + 1, "pp/send_forward");
}

void StageLink::recv_forward(at::Tensor& input, int microbatch, int chunk) {
  recv(input, kForward, microbatch, chunk, chunk - 1, "pp/recv_forward");
}

void StageLink::send_backward(const at::Tensor& input_grad, int microbatch, int chunk) {
  send(input_grad, kBackward, microbatch, chunk, chunk - 1, "pp/send_backward");
}

void StageLink::recv_backward(at::Tensor& output_grad, int microbatch, int chunk) {
  recv(output_grad, kBackward, microbatch, chunk, chunk + 1, "pp/recv_backward");
}

void StageLink::release_completed() {
  // Sends complete in order per peer in practice; dropping the finished head
  // frees each activation as soon as it is out without polling every handle.
  while (!in_flight_.empty() && in_flight_.front()->is_completed()) in_flight_.pop_front();
}

void StageLink::wait_sends() {
  while (!in_flight_.empty()) {
    in_flight_.front()->wait();
    in_flight_.pop_front();
  }
}

}  // namespace hpcrl::parallel::pipeline
