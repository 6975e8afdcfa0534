// How a decoder's layers are cut into pipeline-parallel model chunks: a
// validated value type that every rank computes the same way from the
// architecture and the layout (so ranks agree on who holds what without
// talking). The pp group has `pp` ranks; each holds `virtual_stages` chunks
// (more than one only for interleaved 1F1B). Chunk c of the pp·virtual_stages
// chunks, in model order, lives on pp rank c % pp (Megatron's virtual
// pipeline: rank r holds chunks r, r + pp, r + 2·pp, ...).
//
// The embedding belongs to chunk 0; the final norm, the LM head and the value
// head to the last chunk. With tied embeddings the last chunk also holds the
// embedding table (its LM head), and pipeline_stage.h keeps the two copies'
// gradients equal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcrl/config/model_arch.h"

namespace hpcrl::model {

struct PipelineLayout {
  int pp = 1;                        // ranks in the pp group
  int virtual_stages = 1;            // model chunks per rank
  std::vector<int64_t> chunk_layers; // layers of each chunk, in model order (pp · virtual_stages entries)

  int num_chunks() const { return static_cast<int>(chunk_layers.size()); }
  int64_t first_layer(int chunk) const;  // the chunk's layers are [first_layer, end_layer)
  int64_t end_layer(int chunk) const;
  int rank_of_chunk(int chunk) const { return chunk % pp; }
  std::vector<int> chunks_of_rank(int pp_rank) const;  // ascending
  int chunk_of_layer(int64_t layer) const;
  bool is_last_chunk(int chunk) const { return chunk == num_chunks() - 1; }
  // "pp=2 × 1 chunk: layers [0, 3) | [3, 6)" (logs, error messages, docs).
  std::string describe() const;
};

// Splits arch.num_layers over pp · virtual_stages chunks.
// `layers_per_chunk` empty: balanced by parameter count — the embedding counts
// on the first chunk; the final norm, the LM head (the embedding copy when
// tied) and the value head on the last — minimising the largest chunk.
// Otherwise the explicit per-chunk layer counts, in model order.
// InputError naming the fix when pp or virtual_stages < 1, virtual_stages > 1
// with pp = 1, more chunks than layers, a list with the wrong number of
// entries, a zero-layer chunk, or counts that do not add up to the layers.
PipelineLayout partition_layers(const ModelArch& arch, int pp, int virtual_stages = 1,
                                const std::vector<int64_t>& layers_per_chunk = {}, bool lm_head = true,
                                bool value_head = false);

}  // namespace hpcrl::model
