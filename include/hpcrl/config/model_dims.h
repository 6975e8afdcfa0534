// The few model numbers that layout checks need (docs/communication.md), kept as a plain
// struct in `config` so `dist` can validate a mesh without depending on `io`
// or `model`. Zero means "unknown" (e.g. weights not available): that check is skipped.
#pragma once

#include <cstdint>

namespace hpcrl {

struct ModelDims {
  int64_t heads = 0;       // attention (query) heads
  int64_t kv_heads = 0;    // key/value heads (GQA)
  int64_t layers = 0;      // decoder layers
  int64_t experts = 0;     // routed experts; 0 = dense model
  int64_t seq_len = 0;     // max sequence length the role will run
  int64_t vocab = 0;       // vocabulary size (tp splits it)
  int64_t hidden = 0;      // model width
  int64_t intermediate = 0;  // FFN width
};

}  // namespace hpcrl
