// The communicators a model replica's layers need, handed to every parallel
// layer at construction. A null communicator means that dimension has size 1,
// so the same code runs on one rank: layers test for null to choose their
// one-rank code path, and a collective on a possibly-null group goes through
// dist::all_reduce(ctx.tp, t) and its siblings (communicator.h), which give the
// one-rank result for null, as Communicator itself does for a group of one.
#pragma once

#include "hpcrl/distributed/mesh_comms.h"

namespace hpcrl::parallel {

struct ParallelContext {
  dist::CommPtr tp;   // tensor parallel: heads, FFN columns, vocab
  dist::CommPtr sp;   // Ulysses sequence parallel
  dist::CommPtr ep;   // expert parallel (MoE)
  dist::CommPtr dp;   // data parallel (gradient sync; dp·sp group for grads is `grad`)
  dist::CommPtr grad; // dp·sp group over which gradients are averaged
  dist::CommPtr pp;   // pipeline parallel

  int tp_size() const { return tp ? tp->size() : 1; }
  int tp_rank() const { return tp ? tp->rank() : 0; }
  int sp_size() const { return sp ? sp->size() : 1; }
  int sp_rank() const { return sp ? sp->rank() : 0; }
  int ep_size() const { return ep ? ep->size() : 1; }
  int ep_rank() const { return ep ? ep->rank() : 0; }
  int pp_size() const { return pp ? pp->size() : 1; }
  int pp_rank() const { return pp ? pp->rank() : 0; }
  int dp_size() const { return dp ? dp->size() : 1; }
  int dp_rank() const { return dp ? dp->rank() : 0; }

  // What a member rank's layers use of its mesh's communicators. Groups of one
  // rank stay null, so a layer's `if (tp)` picks the one-rank path for them too.
  static ParallelContext of(const dist::MeshComms& comms) {
    return ParallelContext{dist::multi_rank(comms.tp), dist::multi_rank(comms.sp), dist::multi_rank(comms.ep),
                           dist::multi_rank(comms.dp), dist::multi_rank(comms.dp_sp), dist::multi_rank(comms.pp)};
  }
};

}  // namespace hpcrl::parallel
