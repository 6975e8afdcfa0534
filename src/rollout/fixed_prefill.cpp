// The fixed-shape prefill (fixed_prefill.h).
#include "rollout/fixed_prefill.h"

#include <torch/utils.h>

#include <algorithm>

#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

FixedPrefill::FixedPrefill(FixedStepParts parts)
    : parts_(parts), live_slots_(parts.rows.slots()), usable_(parts.slots.capacity() - 1) {
  const auto longs = parts.rows.positions(1).options();
  ids_ = at::zeros({live_slots_, usable_}, longs);
  inputs_ = at::zeros({3, live_slots_}, longs);
}

StepShape FixedPrefill::shape_of(int64_t prompts, int64_t longest, int64_t sequences) const {
  return {StepBuckets::rows(sequences, live_slots_), StepBuckets::keys(longest, usable_),
          StepBuckets::rows(prompts, live_slots_)};
}

bool FixedPrefill::fits(int64_t prompts, int64_t longest, int64_t sequences) const {
  if (prompts < 1 || longest > usable_ || sequences > live_slots_) return false;
  const StepShape shape = shape_of(prompts, longest, sequences);
  return parts_.forward.prefill_chunk(shape.prompts, shape.keys) >= shape.keys;
}

at::Tensor FixedPrefill::prefill(int64_t first, const std::vector<const std::vector<int32_t>*>& prompts,
                                 const std::vector<int64_t>& prompt_of) {
  torch::NoGradGuard no_grad;
  int64_t longest = 0;
  for (const auto* p : prompts) longest = std::max<int64_t>(longest, int64_t(p->size()));
  const int64_t F = int64_t(prompt_of.size());
  HPCRL_CHECK(fits(int64_t(prompts.size()), longest, F) && first >= 0 && first + F <= live_slots_,
              "a fixed prefill of " << prompts.size() << " prompts of up to " << longest << " tokens for " << F
                                    << " sequences from slot " << first << " does not fit " << live_slots_
                                    << " slots of " << usable_ << " columns in one chunk");
  const StepShape shape = shape_of(int64_t(prompts.size()), longest, F);
  stage(shape, first, prompts, prompt_of);
  parts_.launcher.launch(shape, [this, shape] { run(shape); });
  return logits_.at(shape).narrow(0, 0, F);
}

void FixedPrefill::stage(StepShape shape, int64_t first, const std::vector<const std::vector<int32_t>*>& prompts,
                         const std::vector<int64_t>& prompt_of) {
  const int64_t U = int64_t(prompts.size()), F = int64_t(prompt_of.size());
  at::Tensor ids = at::zeros({shape.prompts, shape.keys}, at::kLong);
  at::Tensor inputs = at::zeros({3, live_slots_}, at::kLong);
  auto id = ids.accessor<int64_t, 2>();
  auto in = inputs.accessor<int64_t, 2>();
  for (int64_t u = 0; u < shape.prompts; ++u) {
    const std::vector<int32_t>& p = *prompts[size_t(u < U ? u : 0)];  // a padded prompt is prompt 0 again
    for (size_t t = 0; t < p.size(); ++t) id[u][int64_t(t)] = p[t];
    in[0][u] = int64_t(p.size());
  }
  for (int64_t f = 0; f < shape.rows; ++f) {
    const int64_t g = f < F ? f : 0;  // a padded sequence is sequence 0 again
    in[1][f] = prompt_of[size_t(g)];
    in[2][f] = first + g;
  }
  ids_.narrow(0, 0, shape.prompts).narrow(1, 0, shape.keys).copy_(ids);
  inputs_.copy_(inputs);
}

void FixedPrefill::run(StepShape shape) {
  const at::Tensor ids = ids_.narrow(0, 0, shape.prompts).narrow(1, 0, shape.keys);
  const at::Tensor lengths = inputs_[0].narrow(0, 0, shape.prompts);
  const at::Tensor prompt = inputs_[1].narrow(0, 0, shape.rows), slot = inputs_[2].narrow(0, 0, shape.rows);
  const at::Tensor logits = parts_.forward.prefill_fixed(parts_.slots, ids, lengths, prompt, slot);
  // A live row's slot is its row (generation_run.h): the first tokens go to the rows of the slots.
  const at::Tensor uniforms = parts_.filter.temperature > 0 ? parts_.rows.next_uniforms_at(slot) : at::Tensor();
  const ChosenTokens chosen = choose_tokens_on_device(logits, parts_.filter, uniforms, parts_.tempered);
  parts_.rows.append_at(slot, chosen.ids, chosen.logprobs);
  logits_[shape] = logits;
}

}  // namespace hpcrl::rollout
