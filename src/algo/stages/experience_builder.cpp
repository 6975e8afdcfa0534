// The training half of collecting a GRPO/PPO iteration (experience_builder.h).
#include "hpcrl/algo/stages/experience_builder.h"

#include <torch/utils.h>

#include "hpcrl/algo/objectives/logprob_mismatch.h"
#include "hpcrl/algo/objectives/offpolicy_weights.h"
#include "hpcrl/algo/objectives/policy_loss.h"
#include "hpcrl/algo/remote/remote_reference.h"
#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/training/step_sums.h"

namespace hpcrl::algo {

ExperienceBuilder::ExperienceBuilder(const PolicyStageContext& stage) : stage_(stage) {
  Role* reference = stage.reference;
  if (reference && on_own_ranks(*reference, stage.policy))
    remote_reference_ = std::make_unique<RemoteReference>(*reference, stage.policy, stage.env.world->size(),
                                                          stage.cfg.train, sampling_temperature(stage.cfg), stage.name);
}

ExperienceBuilder::~ExperienceBuilder() = default;

at::Tensor ExperienceBuilder::logprobs_under(Role& role, const TokenBatch& batch) const {
  return forward_logprobs(role, batch, micro_batch_options(stage_.cfg.train, stage_.policy.ctx.sp_size()),
                          sampling_temperature(stage_.cfg));
}

void ExperienceBuilder::serve_reference() { remote_reference_->serve(); }

Experience ExperienceBuilder::make(RolloutSamples& kept, int64_t iteration, int64_t staleness, RlMetrics& m) {
  Experience e;
  const int32_t pad = std::max(0, stage_.policy.tokenizer->pad_id());
  if (kept.size() == 0) {
    kept.prompt_ids.push_back({pad});  // an empty batch still needs a shape; its mask is all zero
    kept.response_ids.push_back({});
  }
  e.batch =
      make_token_batch(kept.prompt_ids, kept.response_ids, pad, stage_.policy.ctx.sp_size(), stage_.policy.device(),
                       &kept.sampled);
  if (kept.size() == 0) return empty(std::move(e), iteration, staleness, m);
  e.scores = at::tensor(std::vector<float>(kept.scores.begin(), kept.scores.end())).to(stage_.policy.device());
  e.truncated = kept.truncated;
  const at::Tensor engine_logp = scatter_response_values(e.batch, kept.logprobs);
  add_old_logprobs(e, engine_logp, m);
  if (stage_.cfg.decoupled()) {
    e.behaviour_logp = engine_logp;
    if (!e.old_from_update) add_offpolicy_metrics(e, m);  // else the update reports them
  }
  if (measures_mismatch(iteration, staleness)) add_mismatch(e, engine_logp, m);
  if (remote_reference_)
    timed_phase(stage_.name, "ref_logprob", m, [&] { e.ref_logp = remote_reference_->logprobs(kept, e.batch); });
  else if (stage_.reference)
    timed_phase(stage_.name, "ref_logprob", m, [&] { e.ref_logp = logprobs_under(*stage_.reference, e.batch); });
  return e;
}

Experience ExperienceBuilder::empty(Experience e, int64_t iteration, int64_t staleness, RlMetrics& m) {
  e.batch = slice_rows(e.batch, 0, 0);
  if (remote_reference_) remote_reference_->logprobs(RolloutSamples(), e.batch);  // the reference still answers
  e.old_logp = e.batch.loss_mask.clone();
  e.scores = at::zeros({0}, e.batch.loss_mask.options());
  // No tokens here, but the dp group reduces the figures together (in the update, when it measures them).
  e.old_from_update = stage_.plan.old_logprobs == OldLogprobs::kUpdateForward;
  if (stage_.cfg.decoupled()) {  // zero weights here; the figures are reduced over every rank
    e.behaviour_logp = e.old_logp;
    if (!e.old_from_update) add_offpolicy_metrics(e, m);
  }
  if (!measures_mismatch(iteration, staleness)) return e;
  if (e.old_from_update)
    e.engine_logp = e.old_logp;
  else
    add_mismatch_metrics(e.old_logp, e.old_logp, e.batch, m);
  return e;
}

void ExperienceBuilder::add_old_logprobs(Experience& e, const at::Tensor& engine_logp, RlMetrics& m) {
  switch (stage_.plan.old_logprobs) {
    case OldLogprobs::kEngine:
      e.old_logp = engine_logp;
      return;
    case OldLogprobs::kPass:
      timed_phase(stage_.name, "old_logprob", m, [&] { e.old_logp = logprobs_under(stage_.policy, e.batch); });
      return;
    case OldLogprobs::kUpdateForward:
      e.old_from_update = true;
      return;
  }
}

void ExperienceBuilder::add_mismatch(Experience& e, const at::Tensor& engine_logp, RlMetrics& m) {
  switch (stage_.plan.old_logprobs) {
    case OldLogprobs::kEngine: {  // a forward of its own, every logprob_mismatch_every-th iteration
      at::Tensor trainer_logp;
      timed_phase(stage_.name, "mismatch_logprob", m, [&] { trainer_logp = logprobs_under(stage_.policy, e.batch); });
      return add_mismatch_metrics(trainer_logp, engine_logp, e.batch, m);
    }
    case OldLogprobs::kPass:
      return add_mismatch_metrics(e.old_logp, engine_logp, e.batch, m);
    case OldLogprobs::kUpdateForward:
      e.engine_logp = engine_logp;  // the update compares its own forward with them
      return;
  }
}

bool ExperienceBuilder::measures_mismatch(int64_t iteration, int64_t staleness) const {
  if (staleness != 0) return false;  // the engine sampled with older weights: a policy lag, not a kernel mismatch
  return stage_.cfg.recompute_old_logprobs || mismatch_pass_due(iteration, stage_.cfg.logprob_mismatch_every);
}

void ExperienceBuilder::add_mismatch_metrics(const at::Tensor& trainer_logp, const at::Tensor& engine_logp,
                                       const TokenBatch& batch, RlMetrics& m) {
  double abs_max = 0;
  const MismatchSums local =
      mismatch_sums(trainer_logp, engine_logp.to(trainer_logp.device()), batch.loss_mask, abs_max);
  for (const auto& kv : mismatch_metrics(reduce_mismatch(local, abs_max, stage_.policy.ctx.dp))) m.extra.push_back(kv);
}

void ExperienceBuilder::add_offpolicy_metrics(const Experience& e, RlMetrics& m) {
  OffpolicySums local;
  const double local_max =
      add_offpolicy_sums(e.old_logp, e.behaviour_logp, e.batch.loss_mask, stage_.cfg.tis_cap, local);
  const OffpolicySums tot = unpack<OffpolicySums>(sum_over_dp(stage_.policy, pack(local)));
  at::Tensor w_max = at::full({1}, local_max, at::kDouble);
  dist::all_reduce(stage_.policy.ctx.dp, w_max, dist::ReduceOp::kMax);
  for (const auto& kv : offpolicy_metrics(tot, w_max.item<double>())) m.extra.push_back(kv);
}

}  // namespace hpcrl::algo
