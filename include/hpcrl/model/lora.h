// LoRA on a DecoderModel: which projections get adapters, freezing the base,
// and the adapter's files in PEFT's layout.
//
// An adapted model trains only its adapter factors (and a value head, which a
// critic starts without: PEFT's modules_to_save). Its full weights can be read
// two ways (model/weights.h AdapterView): merged, W + (alpha/r)·B·A, which is
// what generation copies, snapshots and exported models hold; or base, the
// frozen W, which checkpoints hold beside the adapter so a resume restores
// both exactly.
//
// PEFT layout (a directory): adapter_config.json ("peft_type": "LORA", r,
// lora_alpha, lora_dropout, target_modules, ...) and adapter_model.safetensors
// with keys "base_model.model.<HF module>.lora_A.weight" [r, in] and
// "….lora_B.weight" [out, r] (plus "base_model.model.score.weight" for a critic).
#pragma once

#include <string>
#include <vector>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/parallel/tensor/lora.h"

namespace hpcrl::model {

struct LoraSpec {
  parallel::tensor::LoraShape shape;
  std::vector<std::string> targets;  // q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj
};

// Adds adapters to the targeted projections of every layer this rank holds:
// A ~ U(±1/√in) from (seed, name) like init_weights (so every layout draws the
// same full A), B = 0 (the model starts equal to its base). Then freezes every
// other parameter except the value head. InputError for a target the
// architecture lacks as a dense projection (an MoE layer's MLP).
void attach_lora(DecoderModel& model, const LoraSpec& spec, uint64_t seed);

// Whether any of the model's parameters is a LoRA factor.
bool has_lora(DecoderModel& model);

// Collective over the model's tp group: writes adapter_config.json and
// adapter_model.safetensors into `dir` (writer only; files atomic).
// `base_model` is recorded as base_model_name_or_path.
void save_lora_adapter(DecoderModel& model, const LoraSpec& spec, const std::string& dir, bool writer,
                       const std::string& base_model);

// The LoRA settings of a PEFT adapter directory (its adapter_config.json): r,
// lora_alpha, lora_dropout, target_modules. InputError naming the file for a
// missing file, a non-LoRA adapter or a target hpcrl has no adapter path for.
LoraSpec read_lora_spec(const std::string& dir);

// Reads a PEFT adapter directory into the model's adapters (each rank its
// slice). InputError naming the file and the fix when its r, lora_alpha or
// target_modules differ from `spec`, or a factor is missing or misshapen.
void load_lora_adapter(DecoderModel& model, const LoraSpec& spec, const std::string& dir);

}  // namespace hpcrl::model
