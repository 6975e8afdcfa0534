// The live rows' generation state on the model's device, so that decoding
// needs nothing from the host between two host syncs: each row's last token
// (the next step's input), its position, how many tokens it has generated,
// whether it has ended — on an EOS id or at max_new_tokens, both checked on
// the device — and the tokens and log-probs it produced since the last sync.
// The host reads all of it in one copy per sync (every `interval` decode steps)
// instead of a blocking copy per token; a row that ended keeps being computed
// until then, and what it produces after its end is never logged (overshoot).
// Stop strings need the text, so the host checks them at the sync and cuts
// the row there (generation_run.cpp). Private to the engine.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace hpcrl::rollout {

struct SamplingParams;

class DeviceRows {
 public:
  // `slots` rows; at most `interval` decode steps (plus one admission) between syncs.
  DeviceRows(int64_t slots, int64_t interval, const SamplingParams& params, at::Device device);

  // Rows [first, first + count) start sequences at the given positions (the
  // lengths prefilled) having generated `generated` tokens (0, or a paused
  // sample's count): nothing logged.
  void start(int64_t first, const std::vector<int64_t>& positions, const std::vector<int64_t>& generated);
  // Rows [first, first + ids.size(0)) produced ids [R] (int64) with log-probs
  // [R] (float32) on the device: logged unless the row had ended; then the EOS
  // and max_new_tokens checks.
  void append(int64_t first, const at::Tensor& ids, const at::Tensor& logprobs);
  // One decode step was taken for rows [0, rows): their positions advance.
  void advance(int64_t rows);

  at::Tensor last_tokens(int64_t rows) const { return last_.narrow(0, 0, rows); }  // [rows] int64
  at::Tensor positions(int64_t rows) const { return position_.narrow(0, 0, rows); }

  // What rows [0, rows) logged since the last sync, on the host; then the log is emptied.
  struct Log {
    at::Tensor count;     // [rows] int64: tokens logged per row
    at::Tensor ids;       // [rows, width] int64
    at::Tensor logprobs;  // [rows, width] float32
  };
  Log take_log(int64_t rows);
  // Row `from`'s state moves to row `to` (the engine keeps live rows contiguous); the log must be empty.
  void move(int64_t from, int64_t to);

 private:
  at::Tensor last_, position_, generated_, ended_, count_;  // [slots]
  at::Tensor log_ids_, log_logprobs_;                       // [slots, interval + 1]
  at::Tensor eos_;                                          // [E] int64
  const int64_t max_new_tokens_;
};

}  // namespace hpcrl::rollout
