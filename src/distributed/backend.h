// What a transport (MPI for CPU tensors, NCCL for CUDA tensors) must provide
// to the Communicator facade. Backends see only flat, contiguous buffers that
// the facade has already shape-checked and allocated; dims, splits, dtype
// promotion of outputs and tracing live once in the facade (communicator.cpp).
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::dist {

class Backend {
 public:
  virtual ~Backend() = default;

  // In place over `t`.
  virtual void all_reduce(at::Tensor& t, ReduceOp op) = 0;
  // out = concatenation of every rank's `in` (out.numel() == size · in.numel()).
  virtual void all_gather(const at::Tensor& in, at::Tensor& out) = 0;
  // out = this rank's 1/size block of the reduction of `in`.
  virtual void reduce_scatter(const at::Tensor& in, at::Tensor& out, ReduceOp op) = 0;
  virtual void broadcast(at::Tensor& t, int root) = 0;
  // Element counts per peer; blocks are laid out in rank order in both buffers.
  virtual void all_to_all(const at::Tensor& in, at::Tensor& out, const std::vector<int64_t>& send_elems,
                          const std::vector<int64_t>& recv_elems) = 0;
  virtual void send(const at::Tensor& t, int peer, int tag) = 0;
  virtual void recv(at::Tensor& t, int peer, int tag) = 0;
  virtual void barrier() = 0;

  // Runs `op` (calls to the methods above) so that it overlaps the caller's
  // compute, in submission order with the group's other asynchronous work.
  // `in_use` are the tensors `op` touches (kept safe from memory reuse).
  virtual WorkPtr run_async(std::function<void()> op, const std::vector<at::Tensor>& in_use) = 0;
  // Point-to-point without a queue: a send and a receive queued behind each
  // other on every rank of a ring would deadlock, so they are posted directly.
  virtual WorkPtr send_async(const at::Tensor& t, int peer, int tag) = 0;
  virtual WorkPtr recv_async(const at::Tensor& t, int peer, int tag) = 0;
  // Before a blocking collective: everything submitted with run_async has been
  // issued ahead of it, so every rank sees the group's collectives in one order.
  virtual void drain() = 0;
};

}  // namespace hpcrl::dist
