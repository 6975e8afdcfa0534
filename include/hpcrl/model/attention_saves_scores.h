// Whether attend() (attention_kernel.h) keeps the softmax probabilities of every
// query and key for the backward, in a header without ATen so that `hpcrl plan`
// (distributed/plan_memory.cpp) can size the activations of the build it runs in.
// The constants are defined in distributed/plan_constants.h (a lower layer, which
// `hpcrl plan` reads them from) and explained there.
#pragma once

#include "hpcrl/distributed/plan_constants.h"

namespace hpcrl::model {

using dist::kAttentionRepeatsKvHeads;
using dist::kAttentionSavesScores;

}  // namespace hpcrl::model
