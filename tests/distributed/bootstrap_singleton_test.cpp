// A single process with no launcher: init() brings MPI up itself (singleton
// MPI_Init_thread), the world is one rank, collectives are identities, and
// finalize() shuts MPI down. Errors before init and for bad devices are clear.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/util/error.h"

namespace hpcrl::dist {
namespace {

TEST(BootstrapSingleton, NoLauncherGivesAWorldOfOne) {
  EXPECT_THROW(world(), RuntimeError);  // not initialised yet: a clear error, not rank 0 by accident
  const WorldInfo& w = init(nullptr, nullptr);
  EXPECT_EQ(&init(nullptr, nullptr), &w);  // idempotent
  int level = 0;
  MPI_Query_thread(&level);
  EXPECT_EQ(level, MPI_THREAD_MULTIPLE);
  EXPECT_EQ(w.rank, 0);
  EXPECT_EQ(w.size, 1);
  EXPECT_EQ(w.local_rank, 0);
  EXPECT_EQ(w.local_size, 1);
  EXPECT_EQ(w.node, 0);
  EXPECT_EQ(w.num_nodes, 1);
  auto comm = world_comm();
  at::Tensor t = at::arange(6, at::kFloat);
  comm->all_reduce(t, ReduceOp::kAvg);
  EXPECT_TRUE(at::equal(t, at::arange(6, at::kFloat)));
  EXPECT_TRUE(at::equal(comm->all_gather(t, 0), t));
  comm->all_reduce_async(t, ReduceOp::kSum)->wait();
  EXPECT_TRUE(at::equal(t, at::arange(6, at::kFloat)));
  CommPtr self = new_group({0}, "self");
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(self->size(), 1);
  comm.reset();
  self.reset();
  finalize();
  int finalized = 0;
  MPI_Finalized(&finalized);
  EXPECT_TRUE(finalized);
  finalize();  // safe twice
}

TEST(BootstrapSingleton, DeviceChoiceIsChecked) {
  init(nullptr, nullptr);
  EXPECT_EQ(bind_device(config::Device::cpu), -1);
#ifndef HPCRL_TORCH_CUDA
  try {
    bind_device(config::Device::cuda);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("built against a CPU-only LibTorch"), std::string::npos) << e.what();
  }
#endif
  finalize();
}

}  // namespace
}  // namespace hpcrl::dist
