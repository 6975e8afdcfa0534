// Building a model from what a user names: "preset:NAME" (a built-in
// architecture with seeded initial weights) or a directory holding an HF
// config.json and safetensors weights (single file or sharded).
#pragma once

#include <memory>
#include <string>

#include "hpcrl/config/model_arch.h"
#include "hpcrl/model/decoder_model.h"

namespace hpcrl::model {

// "preset:tiny" -> the preset; a directory -> its config.json. InputError naming
// the path (and the fix) when neither fits.
ModelArch resolve_model_arch(const std::string& spec);

// Builds the model for this rank's place in `ctx` and fills its weights: seeded
// for a preset, this rank's slices of the checkpoint for a directory (InputError
// when the directory has no weights).
std::shared_ptr<DecoderModel> load_model(const std::string& spec, const parallel::ParallelContext& ctx,
                                         ModelOptions options = {});

}  // namespace hpcrl::model
