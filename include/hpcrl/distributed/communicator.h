// One communicator per rank group (tp, sp, dp, pp, ep, ... or the world),
// operating on tensors. CPU tensors go over MPI, CUDA tensors over NCCL; the
// caller never chooses. Every call is recorded in the trace (op, group, bytes,
// seconds). Collectives are in-place where the shape does not change.
//
// Asynchronous variants return a Work handle; OpenMPI does not progress
// non-blocking collectives while the caller computes, so the MPI backend runs
// them on a communication thread (MPI_THREAD_MULTIPLE).
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

namespace hpcrl::dist {

enum class ReduceOp { kSum, kAvg, kMax, kMin };

// Handle of an asynchronous operation. wait() blocks until the result is in the
// output tensor and rethrows a failure of the operation.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  virtual bool is_completed() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;                       // rank within this group
  virtual int size() const = 0;                       // group size
  virtual const std::string& name() const = 0;        // e.g. "policy/tp[0]" (trace label)
  virtual const std::vector<int>& world_ranks() const = 0;  // members, as world ranks

  // In place. kAvg divides by size(). bf16/f16 accumulate in fp32.
  virtual void all_reduce(at::Tensor& t, ReduceOp op = ReduceOp::kSum) = 0;
  // Concatenation of every rank's `t` along `dim` (all inputs have the same shape).
  virtual at::Tensor all_gather(const at::Tensor& t, int64_t dim = 0) = 0;
  // Reduces `t` over ranks, returns this rank's chunk along `dim` (size(dim) % size() == 0).
  virtual at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp op = ReduceOp::kSum, int64_t dim = 0) = 0;
  // Into preallocated buffers (persistent flat buffers, e.g. sharded optimizer
  // state): dim 0 only, no allocation. all_gather_into: `out` holds
  // size()·t.numel() elements laid out as all_gather(t, 0). reduce_scatter_into:
  // `out` receives this rank's t.numel()/size() elements of the reduction.
  virtual void all_gather_into(at::Tensor& out, const at::Tensor& t) = 0;
  virtual void reduce_scatter_into(at::Tensor& out, const at::Tensor& t, ReduceOp op = ReduceOp::kSum) = 0;
  // In place: after the call every rank holds root's `t`.
  virtual void broadcast(at::Tensor& t, int root) = 0;
  // Equal splits: chunk i of `t` along dim 0 goes to rank i; result chunk j came from rank j.
  virtual at::Tensor all_to_all(const at::Tensor& t) = 0;
  // Variable splits along dim 0: send_counts[i] rows go to rank i; recv_counts[j] rows come from rank j.
  virtual at::Tensor all_to_all(const at::Tensor& t, const std::vector<int64_t>& send_counts,
                                const std::vector<int64_t>& recv_counts) = 0;
  // Point to point; `peer` is a rank within this group. recv fills a tensor of the agreed shape/dtype.
  virtual void send(const at::Tensor& t, int peer, int tag = 0) = 0;
  virtual void recv(at::Tensor& t, int peer, int tag = 0) = 0;
  virtual void barrier() = 0;

  // Asynchronous variants: the tensors must stay alive and untouched until wait().
  virtual WorkPtr all_reduce_async(at::Tensor t, ReduceOp op = ReduceOp::kSum) = 0;
  // reduce_scatter_into, queued behind the group's other asynchronous work.
  virtual WorkPtr reduce_scatter_async(at::Tensor out, at::Tensor t, ReduceOp op = ReduceOp::kSum) = 0;
  // all_gather_into, queued the same way (ZeRO-3 prefetches a layer's parameters with it).
  virtual WorkPtr all_gather_async(at::Tensor out, at::Tensor t) = 0;
  virtual WorkPtr broadcast_async(at::Tensor t, int root) = 0;
  virtual WorkPtr send_async(at::Tensor t, int peer, int tag = 0) = 0;
  virtual WorkPtr recv_async(at::Tensor t, int peer, int tag = 0) = 0;
};
using CommPtr = std::shared_ptr<Communicator>;

}  // namespace hpcrl::dist
