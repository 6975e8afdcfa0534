// Ulysses sequence parallelism (DeepSpeed-Ulysses): the sequence is split over
// the sp ranks everywhere except inside attention, where an all-to-all trades
// the sequence split for a head split — each rank then attends over the whole
// sequence for heads/sp of the heads — and a second all-to-all trades back.
// Both exchanges are autograd ops whose backward is the opposite exchange.
// Chunks are in sp-rank order, so rank j holds tokens [j·T/sp, (j+1)·T/sp).
#pragma once

#include <ATen/ATen.h>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::parallel::sequence {

// [B, T/sp, H, D] (local tokens, all local heads) -> [B, T, H/sp, D] (all tokens, head group sp_rank)
at::Tensor seq_to_heads(const at::Tensor& x, const dist::CommPtr& sp);
// [B, T, H/sp, D] -> [B, T/sp, H, D]; the inverse of seq_to_heads.
at::Tensor heads_to_seq(const at::Tensor& x, const dist::CommPtr& sp);

// Concatenation of every sp rank's [B, T/sp, ...] along dim 1, without autograd
// (for masks and positions, which need no gradient).
at::Tensor gather_sequence(const at::Tensor& x, const dist::CommPtr& sp);
// This rank's [B, T/sp, ...] chunk of a full [B, T, ...] tensor (a view).
at::Tensor sequence_chunk(const at::Tensor& x, const dist::CommPtr& sp);

}  // namespace hpcrl::parallel::sequence
