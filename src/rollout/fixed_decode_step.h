// The decode step as a fixed-shape function of device buffers (engine.h,
// DecodeStep::fixed and ::graphs). The live rows [0, rows) are padded to a row
// bucket B (1, 2, 4, … below the live slot count, then that count; the
// prefix slot above them is never part of a step) and the
// cache is read up to a key bucket (16, 32, 64, … up to the slots' capacity)
// holding the longest row's columns; within the step nothing depends on a host
// value: the rows' tokens, positions, ends and draw indices are DeviceRows'
// buffers, the live row count a one-element device tensor, the uniforms a
// per-row table (device_rows.h), and the choice choose_tokens_on_device. So
// the same function runs eagerly (any device; the tests' path) or is replayed
// from a CUDA graph captured once per (B, keys) shape (step_launcher.h).
//
// Padding: rows [rows, B) may be free slots or multi-turn rows parked in the
// top slots (generation_turns.cpp). A padded row is fed at position 0, counts
// as ended (so it logs nothing) and writes its key/value into the scratch
// column — one column past the slots' usable capacity, which no row's
// attention reads — so it changes nothing any row keeps. Private to the engine.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/kv_slots.h"
#include "hpcrl/rollout/sampling.h"
#include "hpcrl/rollout/slot_forward.h"
#include "rollout/device_rows.h"
#include "rollout/step_launcher.h"

namespace hpcrl::rollout {

// The buckets a step pads to (exposed for tests).
struct StepBuckets {
  // Row buckets for `slots` slots: powers of two below it, then `slots` itself.
  static int64_t rows(int64_t live, int64_t slots);
  // Key buckets: 16, 32, 64, … capped at `capacity` (the usable columns).
  static int64_t keys(int64_t needed, int64_t capacity);
};

// What the fixed steps — the decode step here and the prefill
// (fixed_prefill.h) — run over: a call's buffers, the launcher they share
// (step_launcher_for: CUDA graphs in one pool, or eager), and the filter they
// choose tokens with on the device.
struct FixedStepParts {
  FixedStepParts(SlotForward& forward, KvSlots& slots, DeviceRows& rows, const SamplingParams& params,
                 StepLauncher& launcher);
  SlotForward& forward;
  KvSlots& slots;     // one column more than the usable capacity: the scratch column
  DeviceRows& rows;   // one row per live slot, with a draw table when sampling
  StepLauncher& launcher;
  const TokenFilter filter;
  const bool tempered;  // log-probs at the temperature
};

class FixedDecodeStep {
 public:
  explicit FixedDecodeStep(FixedStepParts parts);

  // One decode step for live rows [0, rows), whose host lengths it advances;
  // returns the shape it ran at.
  StepShape step(int64_t rows);

 private:
  // The fixed-shape function: reads and writes device buffers only.
  void run(StepShape shape);

  const FixedStepParts parts_;
  const int64_t scratch_;  // the scratch column
  at::Tensor live_rows_;   // [1] int64 on the device: the step's live row count
  int64_t live_rows_host_ = -1;
};

}  // namespace hpcrl::rollout
