// Shared helpers for the multi-rank communicator tests: the world communicator
// (MPI is initialised by tests/support/mpi_gtest_main.cpp) and exact tensor
// comparison that prints both tensors on failure.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "hpcrl/distributed/bootstrap.h"

namespace hpcrl::dist::testing {

inline CommPtr world_comm_for_test() {
  init(nullptr, nullptr);
  return world_comm();
}

inline ::testing::AssertionResult same(const at::Tensor& got, const at::Tensor& want) {
  if (got.sizes() == want.sizes() && got.scalar_type() == want.scalar_type() && at::equal(got, want))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got.scalar_type() << " " << got.sizes() << "\n"
                                       << got << "\nwant " << want.scalar_type() << " " << want.sizes() << "\n"
                                       << want;
}

}  // namespace hpcrl::dist::testing
