// The MPI transport for CPU tensors. Blocking calls run on the caller's
// thread; run_async() hands work to this group's communication thread; p2p
// async posts MPI_Isend/MPI_Irecv directly. Owns its MPI communicator (a dup or
// split of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so failures become exceptions
// that name the group).
#pragma once

#include <mpi.h>

#include <string>

#include "distributed/backend.h"
#include "distributed/comm_thread.h"

namespace hpcrl::dist {

class MpiBackend : public Backend {
 public:
  MpiBackend(MPI_Comm comm, std::string name);
  ~MpiBackend() override;
  MpiBackend(const MpiBackend&) = delete;
  MpiBackend& operator=(const MpiBackend&) = delete;

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  void all_reduce(at::Tensor& t, ReduceOp op) override;
  void all_gather(const at::Tensor& in, at::Tensor& out) override;
  void reduce_scatter(const at::Tensor& in, at::Tensor& out, ReduceOp op) override;
  void broadcast(at::Tensor& t, int root) override;
  void all_to_all(const at::Tensor& in, at::Tensor& out, const std::vector<int64_t>& send_elems,
                  const std::vector<int64_t>& recv_elems) override;
  void send(const at::Tensor& t, int peer, int tag) override;
  void recv(at::Tensor& t, int peer, int tag) override;
  void barrier() override;

  WorkPtr run_async(std::function<void()> op, const std::vector<at::Tensor>& in_use) override;
  WorkPtr send_async(const at::Tensor& t, int peer, int tag) override;
  WorkPtr recv_async(const at::Tensor& t, int peer, int tag) override;
  void drain() override;

 private:
  void divide_for_avg(at::Tensor& t) const;

  MPI_Comm comm_;
  std::string name_;
  int rank_ = 0, size_ = 1;
  CommThread thread_;
};

}  // namespace hpcrl::dist
