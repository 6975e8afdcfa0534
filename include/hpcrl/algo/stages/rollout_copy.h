// Generation for a pipelined role. A pp > 1 role holds only its stage's
// layers, and decoding with a KV cache one token at a time through a pipeline
// would leave every stage idle most of the time; so, as in HybridFlow-style RL
// systems, rollout runs on its own layout: a whole model (pp = 1) with the
// role's tp/sp/ep layout on every rank of the role, loaded with the trained
// weights (gathered over pp and tp) each time generation starts. This is the
// one place that copy is made; evaluation and the RL rollout use it.
#pragma once

#include <memory>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/model/decoder_model.h"
#include "hpcrl/rollout/engine.h"

namespace hpcrl::algo {

// The model the role generates with, brought up to date: the role's own
// model at pp = 1; at pp > 1 role.rollout_copy, built on first use and
// refreshed with the role's current weights on every call (the weight sync
// after training steps, which is why the name says sync), in eval mode.
// Collective over the role's tp, ep and pp groups at pp > 1.
std::shared_ptr<model::DecoderModel> sync_rollout_model(Role& role);

// The options of an engine generating with the role: `slots` continuous-batching
// slots and the decode step its `rollout.decode_step` names (the default for a
// role without a pipeline config, as `hpcrl eval` makes).
rollout::EngineOptions rollout_engine_options(const Role& role, int64_t slots);

}  // namespace hpcrl::algo
