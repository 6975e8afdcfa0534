// The prefill of new prompts as a fixed-shape function of device buffers, for
// the fixed and graphs decode steps (engine.h, DecodeStep): on a GPU an eager
// prefill is ~500 host-dispatched operator calls whatever its size (the
// quickstart's model: ~7.8 ms each on an H200, ~10 a GRPO iteration), so under
// `graphs` it is captured and replayed like the decode step, and its first
// tokens are chosen inside it, on the device.
//
// An admission of U distinct prompts (the longest L tokens) for F sequences
// in slots [first, first + F) runs at a shape of buckets: F and U padded to
// row buckets, L to a key bucket (StepBuckets). What varies between calls of
// one shape lives in device buffers the host fills before the launch: the
// right-padded prompt ids, their lengths, and each sequence's prompt and
// slot. Padding repeats real entries — a padded prompt is prompt 0 again, a
// padded sequence sequence 0 again — so a padded entry writes exactly what a
// real one writes, into the same slot and row, and changes nothing else.
// Positions past a prompt's length (to the key bucket) are computed and
// written past the slot's length, where no row reads.
//
// Only an admission whose padded shape fits one prefill chunk (the attention
// budget, SlotForward::prefill_chunk) runs here; a larger one runs the eager,
// chunked SlotForward::prefill. Private to the engine.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <vector>

#include "hpcrl/rollout/kv_slots.h"
#include "hpcrl/rollout/sampling.h"
#include "hpcrl/rollout/slot_forward.h"
#include "rollout/device_rows.h"
#include "rollout/fixed_decode_step.h"
#include "rollout/step_launcher.h"

namespace hpcrl::rollout {

class FixedPrefill {
 public:
  explicit FixedPrefill(FixedStepParts parts);

  // Whether an admission of `prompts` distinct prompts, the longest `longest`
  // tokens, for `sequences` sequences runs here (its padded shape fits one chunk).
  bool fits(int64_t prompts, int64_t longest, int64_t sequences) const;

  // Prefills prompts[prompt_of[f]] into slot first + f for f in [0, F) (the
  // first U sequences one of each prompt, as SlotForward::prefill) and chooses
  // each sequence's first token into row first + f, which must be started
  // (DeviceRows::start) with the host's slot lengths set. Returns the [F, V]
  // first-token logits, valid until the next launch of the same shape.
  at::Tensor prefill(int64_t first, const std::vector<const std::vector<int32_t>*>& prompts,
                     const std::vector<int64_t>& prompt_of);

 private:
  StepShape shape_of(int64_t prompts, int64_t longest, int64_t sequences) const;
  // Fills the input buffers for `shape` (on the host, then one copy each).
  void stage(StepShape shape, int64_t first, const std::vector<const std::vector<int32_t>*>& prompts,
             const std::vector<int64_t>& prompt_of);
  // The fixed-shape function: reads and writes device buffers only.
  void run(StepShape shape);

  const FixedStepParts parts_;
  const int64_t live_slots_, usable_;  // row buckets up to the rows; prompt positions up to the usable columns
  at::Tensor ids_;                     // [live slots, usable] int64: the prompts, right-padded
  at::Tensor inputs_;                  // [3, live slots] int64: prompt lengths; each sequence's prompt; its slot
  std::map<StepShape, at::Tensor> logits_;  // each shape's output buffer
};

}  // namespace hpcrl::rollout
