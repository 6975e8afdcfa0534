// The fixed-shape decode step (fixed_decode_step.h).
#include "rollout/fixed_decode_step.h"

#include <torch/utils.h>

#include <algorithm>

#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

namespace {
constexpr int64_t kFewestKeys = 16;
}  // namespace

int64_t StepBuckets::rows(int64_t live, int64_t slots) {
  int64_t b = 1;
  while (b < live) b *= 2;
  return std::min(b, slots);
}

int64_t StepBuckets::keys(int64_t needed, int64_t capacity) {
  int64_t b = kFewestKeys;
  while (b < needed) b *= 2;
  return std::min(b, capacity);
}

FixedStepParts::FixedStepParts(SlotForward& forward, KvSlots& slots, DeviceRows& rows, const SamplingParams& params,
                               StepLauncher& launcher)
    : forward(forward),
      slots(slots),
      rows(rows),
      launcher(launcher),
      filter{params.temperature, params.top_k, params.top_p, params.min_p},
      tempered(params.logprobs_at_temperature) {}

FixedDecodeStep::FixedDecodeStep(FixedStepParts parts)
    : parts_(parts), scratch_(parts.slots.capacity() - 1), live_rows_(at::zeros({1}, parts.rows.positions(1).options())) {}

StepShape FixedDecodeStep::step(int64_t rows) {
  torch::NoGradGuard no_grad;
  KvSlots& slots = parts_.slots;
  int64_t longest = 0;
  for (int64_t r = 0; r < rows; ++r) longest = std::max(longest, slots.length(r));
  HPCRL_CHECK(longest + 1 <= scratch_, "decoding past the " << scratch_ << "-token KV slots");
  const StepShape shape{StepBuckets::rows(rows, parts_.rows.slots()), StepBuckets::keys(longest + 1, scratch_)};
  if (rows != live_rows_host_) {  // a fill on the device, outside the step: graphs read the buffer
    live_rows_.fill_(rows);
    live_rows_host_ = rows;
  }
  parts_.launcher.launch(shape, [this, shape] { run(shape); });
  for (int64_t r = 0; r < rows; ++r) slots.set_length(r, slots.length(r) + 1);
  return shape;
}

void FixedDecodeStep::run(StepShape shape) {
  const int64_t B = shape.rows;
  DeviceRows& rows = parts_.rows;
  const at::Tensor padded = at::arange(B, live_rows_.options()) >= live_rows_;  // [B]
  rows.end_padded(B, padded);
  const at::Tensor positions = rows.positions(B).masked_fill(padded, 0);
  const at::Tensor columns = positions.masked_fill(padded, scratch_);
  const at::Tensor logits =
      parts_.forward.decode_fixed(parts_.slots, B, shape.keys, rows.last_tokens(B), positions, columns);
  rows.advance_unpadded(B, padded);
  const at::Tensor uniforms = parts_.filter.temperature > 0 ? rows.next_uniforms(B) : at::Tensor();
  const ChosenTokens chosen = choose_tokens_on_device(logits, parts_.filter, uniforms, parts_.tempered);
  rows.append(0, chosen.ids, chosen.logprobs);
}

}  // namespace hpcrl::rollout
