// The GRPO/PPO actor update (actor_update.h).
#include "hpcrl/algo/stages/actor_update.h"

#include <torch/utils.h>

#include "hpcrl/algo/objectives/logprob_mismatch.h"
#include "hpcrl/algo/training/forward_backward.h"
#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/training/step_sums.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/objectives/sequence_ratio.h"

namespace hpcrl::algo {

// Every per-token input of one micro-batch in its layout (trimmed or packed), this sp rank's columns.
struct ActorMicroBatch {
  at::Tensor old_logp, advantages, ref_logp, mask, weights, behaviour_logp;
  at::Tensor rows;  // each token's row in the mini-batch (what GSPO's sequence ratio sums over)
  at::Tensor loss_mask, engine_logp;  // the update's forward as π_old: what its metrics compare
};

namespace {
// The loss mask the actor trains on: DAPO's overlong filter drops truncated responses.
at::Tensor actor_mask(const Experience& exp, bool overlong_filter) {
  const int64_t B = exp.batch.rows();
  at::Tensor keep = at::ones({B}, at::kFloat);
  if (overlong_filter)
    for (int64_t i = 0; i < B; ++i)
      if (exp.truncated[i]) keep[i] = 0.0f;
  return exp.batch.loss_mask * keep.to(exp.batch.loss_mask.device()).unsqueeze(1);
}

// What the update's forward adds as π_old (`old_logp`, detached) to the decoupled objective's
// importance weights and to the mismatch with the engine, over the micro-batch's response tokens.
void add_update_forward(const at::Tensor& old_logp, const ActorMicroBatch& u, double tis_cap, ActorUpdateSums& s,
                        ActorUpdatePeaks& peaks) {
  if (u.behaviour_logp.defined())
    peaks.iw = std::max(peaks.iw, add_offpolicy_sums(old_logp, u.behaviour_logp, u.loss_mask, tis_cap, s.offpolicy));
  if (u.engine_logp.defined()) {
    double abs_max = 0;
    const MismatchSums ms = mismatch_sums(old_logp, u.engine_logp, u.loss_mask, abs_max);
    s.mismatch.abs_diff += ms.abs_diff;
    s.mismatch.kl += ms.kl;
    s.mismatch.tokens += ms.tokens;
    peaks.mismatch_abs = std::max(peaks.mismatch_abs, abs_max);
  }
}

bool sequence_ratio_loss(const PolicyLossConfig& pl) {
  return pl.kind == PolicyLossKind::gspo || pl.kind == PolicyLossKind::gspo_token;
}

// [n, T] int64: row r holds r at every position.
at::Tensor row_indices(int64_t n, int64_t T, const at::Tensor& like) {
  return at::arange(n, like.options().dtype(at::kLong)).unsqueeze(1).expand({n, T}).contiguous();
}
}  // namespace

int64_t ActorUpdate::minibatches_per_epoch() const { return config::minibatches_per_epoch(stage_.cfg); }

void ActorUpdate::update(const Experience& exp, Trainer& trainer, const PolicyLossConfig& pl, int64_t iteration,
                         RlMetrics& m) {
  timed_phase(stage_.name, "actor_update", m, [&] {
    const int64_t B = exp.batch.rows();
    const int64_t n_mini = minibatches_per_epoch();
    const at::Tensor mask = actor_mask(exp, stage_.cfg.overlong.filter);
    ActorUpdateSums sums;
    ActorUpdatePeaks peaks;
    double norm_sum = 0;
    int64_t step = iteration * stage_.cfg.epochs * n_mini;
    for (int64_t epoch = 0; epoch < stage_.cfg.epochs; ++epoch)
      for (int64_t k = 0; k < n_mini; ++k, ++step)
        norm_sum += actor_step({exp, mask, trainer, pl}, k * B / n_mini, (k + 1) * B / n_mini, step, sums, peaks);
    const auto tot = sum_step_sums(stage_.policy, sums);
    const double tok = std::max(1.0, tot.tokens);
    m.clip_frac = tot.clipped_tokens / tok;
    m.kl = tot.kl_tokens / tok;
    m.entropy = tot.entropy_tokens / tok;
    m.loss = tot.loss / double(stage_.cfg.epochs * n_mini);
    m.grad_norm = norm_sum / double(stage_.cfg.epochs * n_mini);
    if (exp.old_from_update) add_update_forward_metrics(exp, tot, peaks, m);
  });
}

void ActorUpdate::add_update_forward_metrics(const Experience& exp, const ActorUpdateSums& tot, ActorUpdatePeaks peaks,
                                             RlMetrics& m) const {
  at::Tensor peak = at::tensor({peaks.iw, peaks.mismatch_abs}, at::kDouble);
  max_step_values(stage_.policy, peak);
  if (exp.behaviour_logp.defined())
    for (const auto& kv : offpolicy_metrics(tot.offpolicy, peak[0].item<double>())) m.extra.push_back(kv);
  if (exp.engine_logp.defined())
    for (const auto& kv : mismatch_metrics(mismatch_of(tot.mismatch, peak[1].item<double>()))) m.extra.push_back(kv);
}

// The micro-batches of experience rows [lo, hi) with their per-token inputs cut to this rank's layout.
void ActorUpdate::cut_micro_batches(const UpdateInputs& in, int64_t lo, int64_t hi, const at::Tensor& weights,
                                    const at::Tensor& rows, std::vector<TokenBatch>& shards,
                                    std::vector<ActorMicroBatch>& inputs) const {
  const Experience& exp = in.exp;
  const auto& ctx = stage_.policy.ctx;
  for (const MicroBatch& mb : plan_micro_batches(slice_rows(exp.batch, lo, hi),
                                                 micro_batch_options(stage_.cfg.train, ctx.sp_size()))) {
    auto cut = [&](const at::Tensor& t) { return mb.gather_chunk(t.defined() ? t.slice(0, lo, hi) : t, ctx.sp); };
    shards.push_back(sequence_shard(mb.tokens, ctx.sp_rank(), ctx.sp_size()));
    inputs.push_back({cut(exp.old_logp), cut(exp.advantages), cut(exp.ref_logp), cut(in.mask),
                      mb.gather_chunk(weights, ctx.sp), cut(exp.behaviour_logp), mb.gather_chunk(rows, ctx.sp),
                      exp.old_from_update ? cut(exp.batch.loss_mask) : at::Tensor(), cut(exp.engine_logp)});
  }
}

double ActorUpdate::actor_step(const UpdateInputs& in, int64_t lo, int64_t hi, int64_t step, ActorUpdateSums& sums,
                               ActorUpdatePeaks& peaks) {
  const Experience& exp = in.exp;
  const PolicyLossConfig& pl = in.pl;
  const at::Tensor mk = in.mask.slice(0, lo, hi);
  const double den_local = pl.agg == LossAgg::token_mean ? mk.sum().item<double>() : double(hi - lo);
  const double den = std::max(1.0, sum_over_dp(stage_.policy, den_local));
  const double grad_group = stage_.policy.ctx.grad ? stage_.policy.ctx.grad->size() : 1;
  const bool seq_ratio = sequence_ratio_loss(pl);
  const at::Tensor row_tokens = seq_ratio ? mk.sum(1) : at::Tensor();
  std::vector<TokenBatch> shards;
  std::vector<ActorMicroBatch> inputs;
  cut_micro_batches(in, lo, hi, loss_weights(mk, pl.agg) /* on whole rows, before any cut */,
                    seq_ratio ? row_indices(hi - lo, mk.size(1), mk) : at::Tensor(), shards, inputs);
  // The micro-batch's loss and statistics from the policy's final hidden states
  // (with pp on the last stage only; sum_step_sums shares them after the update).
  auto micro_loss = [&](size_t i, const at::Tensor& hidden) {
    const ActorMicroBatch& u = inputs[i];
    auto lp = stage_.policy.model->token_logprobs(hidden, shards[i].targets, /*with_entropy=*/true,
                                                  sampling_temperature(stage_.cfg));
    // One optimizer step a batch: π_old is the policy this forward runs, detached.
    const at::Tensor old_logp = exp.old_from_update ? lp.logprobs.detach() : u.old_logp;
    if (exp.old_from_update) add_update_forward(old_logp, u, pl.tis_cap, sums, peaks);
    PolicyLossInputs pin{lp.logprobs, old_logp, u.advantages, u.mask, u.ref_logp, lp.entropy, u.behaviour_logp};
    if (seq_ratio)
      pin.seq_log_ratio = sequence_log_ratio(lp.logprobs - old_logp, u.mask, u.rows, row_tokens, stage_.policy.ctx.sp);
    PolicyLossOutput po = policy_loss(pin, pl);
    at::Tensor loss = (po.per_token * u.weights).sum() * (grad_group / den);
    const double tok = u.mask.sum().item<double>();
    sums.clipped_tokens += po.clip_frac * tok;
    sums.kl_tokens += po.kl * tok;
    sums.entropy_tokens += po.entropy * tok;
    sums.tokens += tok;
    sums.loss += loss.item<double>() / grad_group;
    return loss;
  };
  forward_backward(stage_.policy, in.trainer, shards, micro_loss);
  return in.trainer.finish_step(stage_.name, step, stage_.env.world->rank());
}

}  // namespace hpcrl::algo
