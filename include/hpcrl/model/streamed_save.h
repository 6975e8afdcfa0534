// An HF checkpoint written tensor by tensor, so that no rank holds a copy of
// the whole model while it is saved: the safetensors writer takes each
// tensor's name, dtype and shape up front and asks for its bytes when it
// reaches it (io/safetensors_writer.h); the tensor is gathered then (over tp,
// and under ZeRO-3 its layer's shards over dp), handed over and dropped.
//
// Every rank of the role walks the tensors in the writer's order (one dtype:
// by name) so that their gathers meet; only the writer writes. Under ZeRO-3
// the outer unit (embeddings, final norm, heads) stays gathered for the walk
// and each layer is gathered when its first tensor comes and released when the
// next layer's does: by name, "model.layers.10." comes after "model.layers.1.",
// so a layer prefetched in numeric order may wait for its turn; a rank holds
// the outer unit and at most three layers.
#pragma once

#include <cstdint>
#include <string>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/model/weights.h"

namespace hpcrl::model {

// Whether save_pretrained streams `model`: a whole model (pp = 1) with one
// dtype, no MoE experts (their HF tensors are not the parameters) and no LoRA
// factors, saved in a view that holds every parameter (not `adapter`).
bool can_stream_save(DecoderModel& model, AdapterView view);

// save_pretrained for a model that can_stream_save accepts. Collective over
// the model's tp group and, under ZeRO-3, its shard group.
void save_pretrained_streamed(DecoderModel& model, const std::string& dir, bool writer, uint64_t max_shard_bytes);

}  // namespace hpcrl::model
