// The Communicator of every MPI rank group: a facade over the group that picks
// the transport by the tensor's device (CPU -> MPI, CUDA -> NCCL, created on
// first use), lays tensors out as the flat buffers backends expect, and records
// every call in the trace. Argument checks and groups of one rank are
// Communicator's (communicator.cpp): the do_* methods here see two or more ranks.
#pragma once

#include <mpi.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/backend.h"
#include "distributed/mpi/mpi_backend.h"
#include "hpcrl/distributed/communicator.h"

namespace hpcrl::dist {

class GroupCommunicator : public Communicator {
 public:
  // Takes ownership of `comm`; `world_ranks[i]` is the world rank of group rank i.
  GroupCommunicator(MPI_Comm comm, std::string name, std::vector<int> world_ranks);

  int rank() const override { return mpi_.rank(); }
  int size() const override { return mpi_.size(); }
  const std::string& name() const override { return name_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }

  void send(const at::Tensor& t, int peer, int tag) override;
  void recv(at::Tensor& t, int peer, int tag) override;
  WorkPtr send_async(at::Tensor t, int peer, int tag) override;
  WorkPtr recv_async(at::Tensor t, int peer, int tag) override;

 protected:
  // Two or more ranks, arguments checked (Communicator's public calls).
  void do_all_reduce(at::Tensor& t, ReduceOp op) override;
  at::Tensor do_all_gather(const at::Tensor& t, int64_t dim) override;
  at::Tensor do_reduce_scatter(const at::Tensor& t, ReduceOp op, int64_t dim) override;
  void do_all_gather_into(at::Tensor& out, const at::Tensor& t) override;
  void do_reduce_scatter_into(at::Tensor& out, const at::Tensor& t, ReduceOp op) override;
  void do_broadcast(at::Tensor& t, int root) override;
  at::Tensor do_all_to_all(const at::Tensor& t, const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows) override;
  void do_barrier() override;
  WorkPtr do_all_reduce_async(at::Tensor t, ReduceOp op) override;
  WorkPtr do_reduce_scatter_async(at::Tensor out, at::Tensor t, ReduceOp op) override;
  WorkPtr do_all_gather_async(at::Tensor out, at::Tensor t) override;
  WorkPtr do_broadcast_async(at::Tensor t, int root) override;

 private:
  Backend& backend_for(const at::Tensor& t);
  // `call` (one of b's collectives) on b's asynchronous queue, traced as `op` over `bytes`.
  WorkPtr queued(const char* op, Backend& b, int64_t bytes, std::function<void()> call,
                 const std::vector<at::Tensor>& in_use);
  void check_peer(int peer, int tag, const char* op) const;

  std::string name_;
  std::vector<int> world_ranks_;
  MpiBackend mpi_;
  std::mutex nccl_mu_;
  std::unique_ptr<Backend> nccl_;  // created on the first CUDA tensor; destroyed before mpi_
};

}  // namespace hpcrl::dist
