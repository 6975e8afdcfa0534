// The buffers a generation call decodes with — the KV slots, the slot
// forward, the rows' device state and the fixed step and prefill with their launcher — and
// when the next call may reuse them. A call makes them; an engine whose decode
// steps are CUDA graphs (engine.h, DecodeStep::graphs) keeps them for its next
// call when that call has the same layout (WorkspaceLayout: slots, capacity,
// sampling filter, max_new_tokens, EOS ids, device, dtype) and the model's
// parameters are where they were when the graphs were captured
// (weight_pointers; an optimizer step, a weight sync that copies in place or
// a weight change in place leaves them there). So an RL run captures its
// decode graphs in its first iteration and replays them in the next ones. A
// graph reads every buffer and weight at its captured address, which is why
// anything else — a resharded copy allocated afresh, merged LoRA weights (made
// anew for every call), another layout — gets a new workspace and new graphs.
// What the kept workspace costs: its KV slots stay allocated between calls
// (while the trainer runs, in a colocated run). Private to the engine.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/kv_slots.h"
#include "hpcrl/rollout/sampling.h"
#include "hpcrl/rollout/slot_forward.h"
#include "rollout/device_rows.h"
#include "rollout/fixed_decode_step.h"
#include "rollout/fixed_prefill.h"

namespace hpcrl::rollout {

// What the buffers of a call, and any graph over them, are shaped by.
struct WorkspaceLayout {
  int64_t live_slots = 1;  // slots rows decode in: min(max_batch, sequences)
  int64_t slots = 1;       // + the prefix slot when a group may be admitted in parts
  int64_t capacity = 1;    // KV columns: the longest prompt + max_new_tokens (graphs: rounded up to
                           // 64, so calls with other prompt lengths share it), + the fixed step's scratch column
  int64_t interval = 1;    // decode steps between host syncs
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;
  DecodeStep step = DecodeStep::dynamic;
  TokenFilter filter;
  bool tempered = false;
  int64_t max_new_tokens = 0;
  std::vector<int32_t> eos;

  // The layout of a call of `sequences` samples over `prompts`.
  static WorkspaceLayout of(const model::DecoderModel& model, const EngineOptions& options,
                            const std::vector<std::vector<int32_t>>& prompts, int64_t sequences,
                            const SamplingParams& params);
  bool operator==(const WorkspaceLayout& o) const;
};

// The data pointers of the model's parameters, in order: where a captured graph reads them.
std::vector<const void*> weight_pointers(const model::DecoderModel& model);

class DecodeWorkspace {
 public:
  // `projections` are the engine's over `model`; prepared for each call by the caller.
  DecodeWorkspace(model::DecoderModel& model, const EngineOptions& options, SlotProjections& projections,
                  WorkspaceLayout layout, const SamplingParams& params);

  // True when a call of `layout` may run on these buffers and their graphs.
  bool reusable_for(const WorkspaceLayout& layout, const model::DecoderModel& model) const;
  // Empties the slots and rows for a call drawing under `params.seed`.
  void begin_call(const SamplingParams& params);
  const WorkspaceLayout& layout() const { return layout_; }

  KvSlots slots;
  SlotForward forward;
  DeviceRows rows;
  // DecodeStep::fixed or ::graphs (all null for dynamic steps): the launcher
  // the fixed decode step and the fixed prefill share (one graph pool), and those two.
  std::unique_ptr<StepLauncher> launcher;
  std::unique_ptr<FixedDecodeStep> fixed;
  std::unique_ptr<FixedPrefill> fixed_prefill;

 private:
  WorkspaceLayout layout_;
  std::vector<const void*> weights_;  // weight_pointers at construction
};

}  // namespace hpcrl::rollout
