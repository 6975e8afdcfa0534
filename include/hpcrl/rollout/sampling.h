// Choosing the next token from a row of logits: greedy, or temperature with
// optional top-k and top-p (nucleus) filtering, drawn with the sequence's own
// generator so the draw does not depend on the other rows of the batch.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace hpcrl::rollout {

// A generator for sample `index` of prompt `prompt` (a splitmix64 mix of the three).
at::Generator sample_generator(uint64_t seed, int64_t prompt, int64_t index);

// logits: [V] float32 (untempered). Returns the chosen id.
int64_t sample_token(const at::Tensor& logits, double temperature, int64_t top_k, double top_p, at::Generator& gen);

}  // namespace hpcrl::rollout
