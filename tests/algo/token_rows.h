// A token batch of rows with given total lengths, for the algo tests: row i
// has a 2-token prompt and a response making `lengths[i]` tokens in all; ids
// count up from 1 + i·stride, so rows never share a token; right-padded with 0.
#pragma once

#include <cstdint>
#include <vector>

#include "hpcrl/algo/training/token_batch.h"

namespace hpcrl::testing {

inline algo::TokenBatch rows_of_lengths(const std::vector<int>& lengths, int32_t stride) {
  std::vector<std::vector<int32_t>> prompts, responses;
  int32_t next = 1;
  for (int len : lengths) {
    prompts.push_back({next, next + 1});
    std::vector<int32_t> r;
    for (int t = 2; t < len; ++t) r.push_back(next + t);
    responses.push_back(r);
    next += stride;
  }
  return algo::make_token_batch(prompts, responses, /*pad_id=*/0);
}

}  // namespace hpcrl::testing
