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
//
// For the fixed-shape decode step (fixed_decode_step.h) the rows also hold
// what a step needs to draw on the device: each row's next draw index and a
// table of its uniforms, draw_uniform(seed, prompt, sample, j) for every draw
// j it may still make, computed on the host when the row starts (the same
// function the host uses for a dynamic step, so both draw the same numbers).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "hpcrl/rollout/sampling.h"

namespace hpcrl::rollout {

struct SamplingParams;

class DeviceRows {
 public:
  // `slots` rows; at most `interval` decode steps (plus one admission) between
  // syncs. draw_table: keep the uniforms' table (a fixed step that samples).
  DeviceRows(int64_t slots, int64_t interval, const SamplingParams& params, at::Device device, bool draw_table);

  // Rows [first, first + count) start sequences at the given positions (the
  // lengths prefilled) having generated `generated` tokens (0, or a paused
  // sample's count), their next draws keyed by `draws`: nothing logged.
  void start(int64_t first, const std::vector<int64_t>& positions, const std::vector<int64_t>& generated,
             const std::vector<DrawKey>& draws);
  // Rows [first, first + ids.size(0)) produced ids [R] (int64) with log-probs
  // [R] (float32) on the device: logged unless the row had ended; then the EOS
  // and max_new_tokens checks.
  void append(int64_t first, const at::Tensor& ids, const at::Tensor& logprobs);
  // append() for the rows named by `rows` ([R] int64 on the device) instead of
  // a range: the fixed prefill's first tokens, whose rows are a device input.
  // A row named twice must be given the same id and log-prob both times (a
  // padded entry repeats a real one): each name writes the same values.
  void append_at(const at::Tensor& rows, const at::Tensor& ids, const at::Tensor& logprobs);
  // Rows [first, first + ids.size(0)) take ids [R] (int64) as their next step's input, nothing logged: rows
  // continued from a kept cache, whose last token was read before their pause.
  void feed(int64_t first, const at::Tensor& ids);
  // One decode step was taken for rows [0, rows): their positions advance.
  void advance(int64_t rows);

  // The fixed step's padding: rows [0, B) where `padded` ([B] bool) is set
  // take no token (they count as ended) and keep their positions.
  void end_padded(int64_t B, const at::Tensor& padded);
  void advance_unpadded(int64_t B, const at::Tensor& padded);
  // [B] float64: each row's uniform for its next draw, from the table.
  at::Tensor next_uniforms(int64_t B) const;
  // The same for the rows named by `rows` ([R] int64 on the device).
  at::Tensor next_uniforms_at(const at::Tensor& rows) const;

  int64_t slots() const { return last_.size(0); }
  at::Tensor last_tokens(int64_t rows) const { return last_.narrow(0, 0, rows); }  // [rows] int64
  at::Tensor positions(int64_t rows) const { return position_.narrow(0, 0, rows); }

  // What rows [0, rows) logged since the last sync, on the host; then the log is emptied.
  struct Log {
    at::Tensor count;     // [rows] int64: tokens logged per row
    at::Tensor ids;       // [rows, width] int64
    at::Tensor logprobs;  // [rows, width] float32
  };
  Log take_log(int64_t rows);
  // No row live, nothing logged, the draws of the next rows keyed under `seed`:
  // a new call on rows kept from the last one.
  void reset(uint64_t seed);
  // Row `from`'s state moves to row `to` (the engine keeps live rows contiguous); the log must be empty.
  void move(int64_t from, int64_t to);
  // Row from[i]'s state into row to[i] for every i at once (each source read
  // before any row is written): one gather and one scatter per buffer. `to` must not repeat.
  void move(const std::vector<int64_t>& from, const std::vector<int64_t>& to);

 private:
  at::Tensor last_, position_, generated_, ended_, count_;  // [slots]
  at::Tensor draw_;                                         // [slots] int64: next draw index (with the table)
  at::Tensor log_ids_, log_logprobs_;                       // [slots, interval + 1]
  at::Tensor uniforms_;                                     // [slots, max_new_tokens] float64, or undefined
  at::Tensor eos_;                                          // [E] int64
  // Which of rows that produced ids [R] and have generated `generated` [R] tokens end there.
  at::Tensor ends(const at::Tensor& ids, const at::Tensor& generated) const;
  const int64_t max_new_tokens_;
  uint64_t seed_;
};

}  // namespace hpcrl::rollout
