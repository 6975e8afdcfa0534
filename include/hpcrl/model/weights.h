// A DecoderModel's weights as HF tensors: seeded initialisation, loading a
// checkpoint (each rank reads only its slice of every tensor, as the layers'
// ShardSpecs say), and gathering the slices back into full HF tensors for
// saving — so what hpcrl saves is an ordinary HF checkpoint (same names,
// shapes, dtypes, config.json) and any layout can load it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "hpcrl/io/tensor_store.h"
#include "hpcrl/model/decoder_model.h"

namespace hpcrl::model {

// How a model with LoRA adapters (model/lora.h) shows its weights as HF tensors.
// A model without adapters is the same in the merged and base views.
enum class AdapterView {
  merged,   // every HF tensor, each adapted W as W + (alpha/r)·B·A: a plain HF model
  base,     // every HF tensor, the frozen W as it is (the adapters are kept apart)
  adapter,  // only the trained part: the LoRA factors and a value head (score.weight)
};

// Matrices and embeddings ~ N(0, 0.02²), norms 1, biases 0. Each full tensor is
// drawn from its own generator seeded by (seed, HF name) and then sliced, so the
// weights do not depend on the layout. `only`: initialise just these names.
// MoE experts and routers are initialised by their block (from the same seed).
void init_weights(DecoderModel& model, uint64_t seed, const std::set<std::string>* only = nullptr);

// Loads every parameter from an HF checkpoint, converting dtypes. A pipeline
// stage reads only its own tensors (the model holds no others). InputError
// naming the checkpoint, the tensor and the fix on a missing tensor or a shape
// that disagrees with config.json. A missing value head ("score.weight": a critic
// started from a causal LM) keeps its seeded initial value. Tensors the model
// does not use are listed in a warning.
// LoRA factors are not part of an HF checkpoint: loading leaves them as they are
// (view merged/base); view adapter loads only them (and score.weight).
void load_weights(DecoderModel& model, const io::TensorStore& checkpoint);

// The same from full tensors in memory (name → full HF tensor), e.g. a snapshot
// of another role or a reference model in tests. `source` names them in errors.
void load_weights(DecoderModel& model, const std::map<std::string, at::Tensor>& full,
                  const std::string& source = "in-memory weights", AdapterView view = AdapterView::base);

// Collective over the model's tp, ep and pp groups: every parameter as the full
// HF tensor (CPU or the parameters' device, their dtype), on every rank — a
// pipeline stage receives the other stages' tensors too. Tied
// models have no lm_head.weight (HF does not store it either).
io::NamedTensors gather_full_weights(DecoderModel& model, AdapterView view = AdapterView::merged);

// The full HF tensor of a parameter split over tp by `spec` (a copy even when
// it is whole): its slices all-gathered, one copy of replicated chunks kept.
// Collective over `tp` when the spec splits it.
at::Tensor gather_tp(const at::Tensor& p, const parallel::tensor::ShardSpec& spec, const dist::CommPtr& tp);

// Writes an HF checkpoint into `dir`: config.json and model.safetensors (or
// shards + index above max_shard_bytes). Collective (it gathers); only ranks with
// `writer` = true write. Files are written atomically. A whole dense model
// without adapters is streamed tensor by tensor (model/streamed_save.h);
// otherwise the full tensors are gathered first (gather_full_weights).
void save_pretrained(DecoderModel& model, const std::string& dir, bool writer,
                     AdapterView view = AdapterView::merged, uint64_t max_shard_bytes = 5'000'000'000ULL);
// config.json for `model` with torch_dtype from `dtype`, atomically.
void write_hf_config(const DecoderModel& model, const std::string& dir, at::ScalarType dtype);

}  // namespace hpcrl::model
