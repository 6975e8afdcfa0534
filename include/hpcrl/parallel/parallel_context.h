// The communicators a model replica's layers need, handed to every parallel
// layer at construction. A null communicator means that dimension has size 1
// (the layer then does no communication), so the same code runs on one rank.
#pragma once

#include "hpcrl/dist/communicator.h"

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
};

}  // namespace hpcrl::parallel
