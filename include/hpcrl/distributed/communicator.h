// One communicator per rank group (tp, sp, dp, pp, ep, ... or the world),
// operating on tensors. CPU tensors go over MPI, CUDA tensors over NCCL; the
// caller never chooses. Every call that communicates is recorded in the trace
// (op, group, bytes, seconds). Collectives are in-place where the shape does
// not change.
//
// A group of one rank communicates nothing, and that rule lives here, once:
// the public collectives check their arguments, then on a group of size one
// return at once with what the full collective gives over one rank (no
// transport call, no NCCL communicator made, no trace record), and otherwise
// run the implementation's do_* method. Callers never guard a collective with
// `size() > 1`.
//
// A null CommPtr also means a group of one rank (ParallelContext leaves its
// one-rank groups null, and the layers test for null to choose a code path).
// The free functions at the end (dist::all_reduce(comm, t), ...) run the
// collective on `comm`, or its one-rank result when `comm` is null, so a call
// site on a possibly-null group needs no guard either. Handing out a one-rank
// communicator instead of null would change every layer's `if (tp)` path
// choice and every context built as ParallelContext{}; four free functions
// change only the call sites that had the guard.
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
  // One rank: `t` unchanged.
  void all_reduce(at::Tensor& t, ReduceOp op = ReduceOp::kSum);
  // Concatenation of every rank's `t` along `dim` (all inputs have the same shape).
  // One rank: `t` itself when contiguous, else a contiguous copy.
  at::Tensor all_gather(const at::Tensor& t, int64_t dim = 0);
  // Reduces `t` over ranks, returns this rank's chunk along `dim` (size(dim) % size() == 0).
  // One rank: `t` itself when contiguous, else a contiguous copy.
  at::Tensor reduce_scatter(const at::Tensor& t, ReduceOp op = ReduceOp::kSum, int64_t dim = 0);
  // Into preallocated buffers (persistent flat buffers, e.g. sharded optimizer
  // state): dim 0 only, no allocation. all_gather_into: `out` holds
  // size()·t.numel() elements laid out as all_gather(t, 0). reduce_scatter_into:
  // `out` receives this rank's t.numel()/size() elements of the reduction.
  // One rank: `t`'s elements copied into `out` (nothing when they are the same memory).
  void all_gather_into(at::Tensor& out, const at::Tensor& t);
  void reduce_scatter_into(at::Tensor& out, const at::Tensor& t, ReduceOp op = ReduceOp::kSum);
  // In place: after the call every rank holds root's `t`. One rank: nothing to do.
  void broadcast(at::Tensor& t, int root);
  // Equal splits: chunk i of `t` along dim 0 goes to rank i; result chunk j came from rank j.
  // One rank: `t` itself when contiguous, else a contiguous copy (both variants).
  at::Tensor all_to_all(const at::Tensor& t);
  // Variable splits along dim 0: send_counts[i] rows go to rank i; recv_counts[j] rows come from rank j.
  at::Tensor all_to_all(const at::Tensor& t, const std::vector<int64_t>& send_counts,
                        const std::vector<int64_t>& recv_counts);
  // Point to point; `peer` is a rank within this group (so never on a group of one).
  // recv fills a tensor of the agreed shape/dtype.
  virtual void send(const at::Tensor& t, int peer, int tag = 0) = 0;
  virtual void recv(at::Tensor& t, int peer, int tag = 0) = 0;
  void barrier();

  // Asynchronous variants: the tensors must be contiguous and stay alive and
  // untouched until wait(). One rank: done before they return (a completed Work).
  WorkPtr all_reduce_async(at::Tensor t, ReduceOp op = ReduceOp::kSum);
  // reduce_scatter_into, queued behind the group's other asynchronous work.
  WorkPtr reduce_scatter_async(at::Tensor out, at::Tensor t, ReduceOp op = ReduceOp::kSum);
  // all_gather_into, queued the same way (ZeRO-3 prefetches a layer's parameters with it).
  WorkPtr all_gather_async(at::Tensor out, at::Tensor t);
  WorkPtr broadcast_async(at::Tensor t, int root);
  virtual WorkPtr send_async(at::Tensor t, int peer, int tag = 0) = 0;
  virtual WorkPtr recv_async(at::Tensor t, int peer, int tag = 0) = 0;

 protected:
  // The collectives over two or more ranks, with arguments already checked:
  // `dim` is in [0, t.dim()), splits and sizes divide, `root` is a group rank,
  // out buffers have the right element count, dtype and device, and async
  // tensors are contiguous.
  virtual void do_all_reduce(at::Tensor& t, ReduceOp op) = 0;
  virtual at::Tensor do_all_gather(const at::Tensor& t, int64_t dim) = 0;
  virtual at::Tensor do_reduce_scatter(const at::Tensor& t, ReduceOp op, int64_t dim) = 0;
  virtual void do_all_gather_into(at::Tensor& out, const at::Tensor& t) = 0;
  virtual void do_reduce_scatter_into(at::Tensor& out, const at::Tensor& t, ReduceOp op) = 0;
  virtual void do_broadcast(at::Tensor& t, int root) = 0;
  // Rows per rank (equal splits arrive here too).
  virtual at::Tensor do_all_to_all(const at::Tensor& t, const std::vector<int64_t>& send_rows,
                                   const std::vector<int64_t>& recv_rows) = 0;
  virtual void do_barrier() = 0;
  virtual WorkPtr do_all_reduce_async(at::Tensor t, ReduceOp op) = 0;
  virtual WorkPtr do_reduce_scatter_async(at::Tensor out, at::Tensor t, ReduceOp op) = 0;
  virtual WorkPtr do_all_gather_async(at::Tensor out, at::Tensor t) = 0;
  virtual WorkPtr do_broadcast_async(at::Tensor t, int root) = 0;

 private:
  void check_into(const at::Tensor& out, const at::Tensor& t, int64_t out_elems, const char* op) const;
  void check_divisible(int64_t n, const char* what, const char* op) const;
  void check_root(int root, const char* op) const;
};
using CommPtr = std::shared_ptr<Communicator>;

// The collective on `comm`; a null `comm` stands for a group of one rank and
// gets that group's result (the same as a Communicator of size one gives).
void all_reduce(const CommPtr& comm, at::Tensor& t, ReduceOp op = ReduceOp::kSum);
at::Tensor all_gather(const CommPtr& comm, const at::Tensor& t, int64_t dim = 0);
at::Tensor reduce_scatter(const CommPtr& comm, const at::Tensor& t, ReduceOp op = ReduceOp::kSum, int64_t dim = 0);
void broadcast(const CommPtr& comm, at::Tensor& t, int root);

}  // namespace hpcrl::dist
