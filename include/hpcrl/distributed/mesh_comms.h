// The communicators of every group of a role's mesh, as seen from this rank.
// Creation is collective over the world (every rank calls it, members of the
// role or not: MPI_Comm_split), one split per group kind; ranks outside the
// role's range get an all-null MeshComms. Groups of size 1 still get a
// communicator, so code on member ranks never checks for null.
#pragma once

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/distributed/mesh.h"

namespace hpcrl::dist {

struct MeshComms {
  CommPtr tp, sp, dp, pp, dp_sp, tp_pp, ep, edp;

  const CommPtr& get(GroupKind kind) const;
  bool is_member() const { return tp != nullptr; }
};

// `comm` when its group has more than one rank, else null (see ParallelContext::of).
inline CommPtr multi_rank(const CommPtr& comm) { return comm && comm->size() > 1 ? comm : nullptr; }

// Communicator names are "<role>/<kind>[<group index>]", e.g. "policy/tp[3]".
MeshComms create_mesh_comms(const Mesh& mesh);

}  // namespace hpcrl::dist
