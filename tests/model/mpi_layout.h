// Communicators of a (tp, sp[, ep]) layout over the whole world for the multi-rank
// model tests: the world is cut into world / (tp·sp) replicas, each one a
// complete layout, so every rank count that is a multiple of tp·sp runs it.
#pragma once

#include <gtest/gtest.h>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/distributed/mesh.h"
#include "hpcrl/distributed/mesh_comms.h"
#include "hpcrl/parallel/parallel_context.h"

namespace hpcrl::testing {

// Null comms for dims of size 1, like a single-rank run.
inline parallel::ParallelContext layout_context(int tp, int sp, int ep = 1) {
  const auto& w = dist::init(nullptr, nullptr);
  dist::ParallelSizes sizes;
  sizes.tp = tp;
  sizes.sp = sp;
  sizes.ep = ep;
  dist::Mesh mesh(sizes, 0, w.size, "test");
  dist::MeshComms comms = dist::create_mesh_comms(mesh);
  parallel::ParallelContext ctx;
  ctx.tp = tp > 1 ? comms.tp : nullptr;
  ctx.sp = sp > 1 ? comms.sp : nullptr;
  ctx.ep = ep > 1 ? comms.ep : nullptr;
  ctx.dp = comms.dp;
  ctx.grad = comms.dp_sp;
  return ctx;
}

inline bool world_fits(int ranks) { return dist::init(nullptr, nullptr).size % ranks == 0; }

}  // namespace hpcrl::testing
