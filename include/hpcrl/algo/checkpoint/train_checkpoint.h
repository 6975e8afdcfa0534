// Checkpoints of a training stage: everything needed to continue exactly.
//   <stage dir>/step-NNNNNN/
//     <role>/config.json, model.safetensors   the HF model (full tensors, any layout can load it)
//     <role>/optimizer-rank-NNNNN.safetensors  this rank's optimizer state (same layout to resume;
//                                              with ZeRO-1 only its shard, so also the same dp size)
//     state.json                               step, data cursors, torch RNG, layout, world size
//     manifest.json                            size and CRC-32C of every file above (checkpoint_integrity.h)
// A step directory is assembled as step-NNNNNN.partial and renamed when every
// rank has written its part, so a crash mid-save never damages the previous one;
// older complete ones beyond keep_last are pruned.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/config/model_arch.h"
#include "hpcrl/distributed/communicator.h"
#include "hpcrl/optim/optimizer.h"

namespace hpcrl::algo {

struct TrainedRole {
  Role* role;
  optim::Optimizer* optimizer;  // null for roles saved without optimizer state
};

// A file a rank adds to the step directory (path relative to it), covered by the manifest.
struct CheckpointFile {
  std::string path;
  std::vector<uint8_t> bytes;
};

// Collective over `world`. `state` is stage-specific JSON (cursor, step, ...) that
// rank 0 writes; `files` are this rank's own additions. Returns the step directory.
std::string save_train_checkpoint(const std::string& stage_dir, int64_t step, const std::vector<TrainedRole>& roles,
                                  const nlohmann::json& state, const dist::CommPtr& world, int64_t keep_last,
                                  const std::vector<CheckpointFile>& files = {});

// Restores models and optimizers from `step_dir`; returns state.json. InputError
// naming the file when it is missing or was written with another layout/world size.
nlohmann::json load_train_checkpoint(const std::string& step_dir, const std::vector<TrainedRole>& roles,
                                     const dist::CommPtr& world);

// `step_dir`/state.json, checked by io::parse_checkpoint_state.
nlohmann::json read_checkpoint_state(const std::string& step_dir);

// The step recorded in `step_dir`/state.json.
int64_t checkpoint_step(const std::string& step_dir);

// The newest complete step directory of a stage ("" when none).
std::string latest_checkpoint(const std::string& stage_dir);

// Torch's default CPU generator state as a JSON array of bytes, and back.
// InputError naming `where` (the state.json) for anything but a state of the
// generator's size that torch accepts.
nlohmann::json rng_state();
void set_rng_state(const nlohmann::json& state, const std::string& where);

// InputError naming `config_json` (a checkpoint's <role>/config.json) when the
// architecture saved there is not `arch`: loading by tensor name alone would
// not notice an edited config.json.
void check_saved_architecture(const std::string& config_json, const ModelArch& arch);

// Restores `role`'s model from `step_dir`/<role name> (precondition: this rank
// holds the role) after checking its config.json against the role.
void load_saved_model(const std::string& step_dir, Role& role);

}  // namespace hpcrl::algo
