// One model role (policy, reference, critic, student, teacher, ...) as this rank
// sees it: its mesh (every rank has it, members or not), the model shard it
// holds, the communicators of its mesh and its tokenizer. Ranks outside the
// role's rank set hold no model (member() is false) and skip the role's work.
// A member's data-parallel coordinates are ctx.dp_rank() / ctx.dp_size().
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/distributed/mesh.h"
#include "hpcrl/io/tokenizer.h"
#include "hpcrl/model/decoder_model.h"
#include "hpcrl/model/lora.h"
#include "hpcrl/optim/param_set.h"
#include "hpcrl/parallel/parallel_context.h"

namespace hpcrl::algo {

struct Role {
  std::string name;
  const config::ModelConfig* config = nullptr;
  dist::Mesh mesh{dist::ParallelSizes{}, 0, 1};  // the role's layout over its ranks
  std::shared_ptr<model::DecoderModel> model;  // null on ranks outside the role
  parallel::ParallelContext ctx;
  dist::CommPtr edp;                           // replicas of this rank's experts (sp·dp / ep ranks)
  bool writer = false;                         // the one rank that writes this role's files
  std::shared_ptr<io::Tokenizer> tokenizer;
  // The model is another role's LoRA model, run with its adapters bypassed: a
  // reference that is the policy's frozen base (runner/role_builder.h says when).
  bool adapters_off = false;
  // pp > 1: the whole (pp = 1) model generation runs on; see algo/stages/rollout_copy.h.
  std::shared_ptr<model::DecoderModel> rollout_copy;

  bool member() const { return model != nullptr; }
  // Where this rank's shard lives (the CPU for ranks outside the role).
  at::Device device() const;
  // Trainable parameters with their sharding, in registration order: with LoRA
  // only the adapter factors (and a value head), the frozen base is left out.
  optim::ParamSet param_set() const;
  // The role's adapters (config lora.rank > 0), else nullopt.
  std::optional<model::LoraSpec> lora() const;
  // Per-rank share of a global batch (on every rank: from the mesh); InputError
  // naming `what` when the role's dp does not divide it.
  int64_t local_batch(int64_t global, const std::string& what) const;
};

}  // namespace hpcrl::algo
