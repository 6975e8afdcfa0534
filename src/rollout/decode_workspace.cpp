// A generation call's buffers, and when the next call may reuse them (decode_workspace.h).
#include "rollout/decode_workspace.h"

#include <algorithm>

namespace hpcrl::rollout {

namespace {
constexpr int64_t kGraphCapacityStep = 64;

int64_t longest_prompt(const std::vector<std::vector<int32_t>>& prompts) {
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, p.size());
  return longest;
}
}  // namespace

WorkspaceLayout WorkspaceLayout::of(const model::DecoderModel& model, const EngineOptions& options,
                                    const std::vector<std::vector<int32_t>>& prompts, int64_t sequences,
                                    const SamplingParams& params) {
  WorkspaceLayout l;
  const at::Tensor& w = model.model->embed_tokens->weight;
  l.live_slots = std::max<int64_t>(1, std::min(options.max_batch, sequences));
  // One slot more when a group may be admitted in parts: it keeps the
  // prompt of the group at the head of the queue (GenerationRun::admit).
  l.slots = l.live_slots + (sequences > l.live_slots ? 1 : 0);
  int64_t usable = std::max<int64_t>(1, longest_prompt(prompts) + params.max_new_tokens);
  if (options.decode_step == DecodeStep::graphs)
    usable = (usable + kGraphCapacityStep - 1) / kGraphCapacityStep * kGraphCapacityStep;
  // A fixed step's padded rows write into one more column, which no row reads.
  l.capacity = usable + (options.decode_step == DecodeStep::dynamic ? 0 : 1);
  l.interval = options.host_sync_interval > 0 ? options.host_sync_interval : (w.device().is_cpu() ? 1 : 8);
  l.device = w.device();
  l.dtype = w.scalar_type();
  l.step = options.decode_step;
  l.filter = {params.temperature, params.top_k, params.top_p, params.min_p};
  l.tempered = params.logprobs_at_temperature;
  l.max_new_tokens = params.max_new_tokens;
  l.eos = params.eos_ids;
  return l;
}

bool WorkspaceLayout::operator==(const WorkspaceLayout& o) const {
  const auto same_filter = filter.temperature == o.filter.temperature && filter.top_k == o.filter.top_k &&
                           filter.top_p == o.filter.top_p && filter.min_p == o.filter.min_p;
  return live_slots == o.live_slots && slots == o.slots && capacity == o.capacity && interval == o.interval &&
         device == o.device && dtype == o.dtype && step == o.step && same_filter && tempered == o.tempered &&
         max_new_tokens == o.max_new_tokens && eos == o.eos;
}

std::vector<const void*> weight_pointers(const model::DecoderModel& model) {
  std::vector<const void*> out;
  for (const at::Tensor& p : model.parameters()) out.push_back(p.defined() ? p.data_ptr() : nullptr);
  return out;
}

DecodeWorkspace::DecodeWorkspace(model::DecoderModel& model, const EngineOptions& options,
                                 SlotProjections& projections, WorkspaceLayout layout, const SamplingParams& params)
    : slots(model, layout.slots, layout.capacity),
      forward(model, options.prefill_attention_elements, projections),
      rows(layout.live_slots, layout.interval, params, layout.device,
           /*draw_table=*/layout.step != DecodeStep::dynamic && params.temperature > 0),
      layout_(std::move(layout)),
      weights_(weight_pointers(model)) {
  if (layout_.step == DecodeStep::dynamic) return;
  launcher = step_launcher_for(model, layout_.step == DecodeStep::graphs);
  const FixedStepParts parts(forward, slots, rows, params, *launcher);
  fixed = std::make_unique<FixedDecodeStep>(parts);
  fixed_prefill = std::make_unique<FixedPrefill>(parts);
}

bool DecodeWorkspace::reusable_for(const WorkspaceLayout& layout, const model::DecoderModel& model) const {
  return layout == layout_ && weight_pointers(model) == weights_;
}

void DecodeWorkspace::begin_call(const SamplingParams& params) {
  slots.clear();
  rows.reset(params.seed);
}

}  // namespace hpcrl::rollout
