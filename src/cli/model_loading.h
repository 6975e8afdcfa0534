// What every command that loads one model shares (score, generate, eval): the
// layout flags --tp --sp --ep --pp (docs/model.md), the tokenizer that goes with
// a model spec, and building this rank's shard of "DIR" or "preset:NAME" on a
// mesh over all ranks. Commands differ only in what they then do with it.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "hpcrl/config/model_arch.h"
#include "hpcrl/distributed/mesh.h"
#include "hpcrl/distributed/mesh_comms.h"
#include "hpcrl/io/tokenizer.h"
#include "hpcrl/model/decoder_model.h"
#include "hpcrl/parallel/parallel_context.h"

namespace hpcrl::cli {

struct LayoutFlags {
  int tp = 1, sp = 1, ep = 1, pp = 1;
  int pp_virtual = 1;  // model chunks per pp rank (interleaved schedule; score only)
};

// Adds --tp --sp --ep --pp to `sub`; `sp_help` says what sp means for this command.
void add_layout_options(CLI::App* sub, LayoutFlags& layout, const std::string& sp_help);

struct LoadedModel {
  dist::Mesh mesh;
  dist::MeshComms comms;
  parallel::ParallelContext ctx;
  std::shared_ptr<model::DecoderModel> model;  // in eval mode
};

// The model a command loads, as its options name it: `spec` (a directory, an HF
// name or a preset), an optional PEFT LoRA `adapter`, the weights' `dtype` and
// the seed of a preset's initial weights.
struct ModelSource {
  std::string spec;
  std::string adapter;
  std::string dtype;
  uint64_t seed = 0;
};

// Collective over the world: the mesh of `layout` over every rank (named `command`
// in messages), checked against `arch` (seq_len: the longest sequence, for the
// sp divisibility check; 0 = unknown), and this rank's shard of `src.spec` in `src.dtype`
// ("float32" | "bfloat16"). With --pp > 1 each rank builds and loads only its
// pipeline stage (layout.pp_virtual chunks, balanced). InputError for a bad
// dtype or a layout that does not fit the ranks or the model. `src.adapter`: a PEFT
// LoRA adapter directory applied on top (unmerged: each adapted projection adds
// its low-rank product).
LoadedModel load_command_model(const ModelSource& src, const ModelArch& arch, const LayoutFlags& layout,
                               const std::string& command, int64_t seq_len = 0);

// --tokenizer when given ("byte" or "builtin": the built-in byte tokenizer), else
// the byte tokenizer for presets, else the one the model directory records (its
// tokenizer.json, or "hpcrl_tokenizer": "byte" in config.json:
// config/model_tokenizer.h); otherwise InputError(`missing`), which should say
// why the command needs one and how to name it.
std::unique_ptr<io::Tokenizer> command_tokenizer(const std::string& model, const std::string& tokenizer,
                                                 const std::string& missing);

}  // namespace hpcrl::cli
