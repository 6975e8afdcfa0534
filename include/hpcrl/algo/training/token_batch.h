// Prompt+response token sequences as the training forward wants them: one
// right-padded [B, T] batch with next-token targets and a loss mask that is 1
// exactly where the target is a response token. Shared by SFT, the RL updates
// (log-probs of sampled responses) and distillation, so every stage scores
// the same positions the same way.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace hpcrl::algo {

struct TokenBatch {
  at::Tensor ids;             // [B, T] int64, right-padded with pad_id
  at::Tensor targets;         // [B, T] int64: ids[:, t+1] (pad past the end)
  at::Tensor loss_mask;       // [B, T] float32: 1 where targets[:, t] is a response token
  at::Tensor attention_mask;  // [B, T] int64: 1 on real tokens (packed: the sequence's id 1, 2, ... in its row)
  at::Tensor positions;       // [B, T] int64 for packed rows (each sequence from 0); undefined: 0, 1, 2, ...
  std::vector<int64_t> prompt_lens, response_lens;  // per row (empty for packed rows)

  int64_t rows() const { return ids.size(0); }
  int64_t response_tokens() const;
  // Prompt + response tokens per row, the mean over rows (0 for packed rows, whose lengths are not kept).
  double mean_row_tokens() const;
  // The padded row length every row is computed at (0 for packed rows: no padding to speak of).
  int64_t padded_row_tokens() const { return packed() ? 0 : ids.size(1); }
  // Several sequences share a row: the model needs positions and the segment mask.
  bool packed() const { return positions.defined(); }
};

// prompts[i] + responses[i] for each row; T = longest row, rounded up to a
// multiple of `multiple` (sequence parallelism splits T evenly). Assembled on
// the host, then moved once to `device` (the model's), so every tensor derived
// from the batch in a loss lives where the log-probs are.
// `sampled` (RolloutSamples::sampled, or null): a response token marked 0 was
// inserted by a multi-turn call, not sampled, and is left out of the loss mask
// (it is still in the row: later tokens attend to it).
TokenBatch make_token_batch(const std::vector<std::vector<int32_t>>& prompts,
                            const std::vector<std::vector<int32_t>>& responses, int32_t pad_id,
                            int64_t multiple = 1, at::Device device = at::kCPU,
                            const std::vector<std::vector<uint8_t>>* sampled = nullptr);
// Row i's response marks (1 sampled, 0 inserted) read back from the loss mask;
// empty when every response token is in it.
std::vector<uint8_t> response_sampled(const TokenBatch& b, int64_t i);

// Rows [begin, end) of a batch.
TokenBatch slice_rows(const TokenBatch& b, int64_t begin, int64_t end);

// This sp rank's contiguous chunk of the time axis (T % sp == 0).
TokenBatch sequence_shard(const TokenBatch& b, int sp_rank, int sp_size);

// Per-response-token values [B, T] (aligned with loss_mask) → a list of each row's
// response values, e.g. the log-probs of each sampled response.
std::vector<std::vector<float>> response_values(const TokenBatch& b, const at::Tensor& values);

}  // namespace hpcrl::algo
