// The GRPO/PPO actor update (actor_update.h).
#include "hpcrl/algo/stages/actor_update.h"

#include <torch/utils.h>

#include "hpcrl/algo/training/forward_backward.h"
#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/training/step_sums.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/objectives/sequence_ratio.h"

namespace hpcrl::algo {

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

// Every per-token input of one micro-batch in its layout (trimmed or packed), this sp rank's columns.
struct ActorMicroBatch {
  at::Tensor old_logp, advantages, ref_logp, mask, weights, behaviour_logp;
  at::Tensor rows;  // each token's row in the mini-batch (what GSPO's sequence ratio sums over)
};

bool sequence_ratio_loss(const PolicyLossConfig& pl) {
  return pl.kind == PolicyLossKind::gspo || pl.kind == PolicyLossKind::gspo_token;
}

// [n, T] int64: row r holds r at every position.
at::Tensor row_indices(int64_t n, int64_t T, const at::Tensor& like) {
  return at::arange(n, like.options().dtype(at::kLong)).unsqueeze(1).expand({n, T}).contiguous();
}
}  // namespace

int64_t ActorUpdate::minibatches_per_epoch() const {
  const int64_t total = stage_.cfg.responses();
  const int64_t mini = stage_.cfg.mini_batch > 0 ? stage_.cfg.mini_batch : total;
  return std::max<int64_t>(1, total / mini);
}

void ActorUpdate::update(const Experience& exp, Trainer& trainer, const PolicyLossConfig& pl, int64_t iteration,
                         RlMetrics& m) {
  timed_phase(stage_.name, "actor_update", m, [&] {
    const int64_t B = exp.batch.rows();
    const int64_t n_mini = minibatches_per_epoch();
    const at::Tensor mask = actor_mask(exp, stage_.cfg.overlong.filter);
    ActorUpdateSums sums;
    double norm_sum = 0;
    int64_t step = iteration * stage_.cfg.epochs * n_mini;
    for (int64_t epoch = 0; epoch < stage_.cfg.epochs; ++epoch)
      for (int64_t k = 0; k < n_mini; ++k, ++step)
        norm_sum += actor_step({exp, mask, trainer, pl}, k * B / n_mini, (k + 1) * B / n_mini, step, sums);
    const auto tot = sum_step_sums(stage_.policy, sums);
    const double tok = std::max(1.0, tot.tokens);
    m.clip_frac = tot.clipped_tokens / tok;
    m.kl = tot.kl_tokens / tok;
    m.entropy = tot.entropy_tokens / tok;
    m.loss = tot.loss / double(stage_.cfg.epochs * n_mini);
    m.grad_norm = norm_sum / double(stage_.cfg.epochs * n_mini);
  });
}

double ActorUpdate::actor_step(const UpdateInputs& in, int64_t lo, int64_t hi, int64_t step, ActorUpdateSums& sums) {
  const Experience& exp = in.exp;
  const at::Tensor& mask = in.mask;
  const PolicyLossConfig& pl = in.pl;
  const at::Tensor mk = mask.slice(0, lo, hi);
  const double den_local = pl.agg == LossAgg::token_mean ? mk.sum().item<double>() : double(hi - lo);
  const double den = std::max(1.0, sum_over_dp(stage_.policy, den_local));
  const double grad_group = stage_.policy.ctx.grad ? stage_.policy.ctx.grad->size() : 1;
  const at::Tensor weights = loss_weights(mk, pl.agg);  // on whole rows, before any cut
  const bool seq_ratio = sequence_ratio_loss(pl);
  const at::Tensor row_tokens = seq_ratio ? mk.sum(1) : at::Tensor();
  const at::Tensor rows = seq_ratio ? row_indices(hi - lo, mk.size(1), mk) : at::Tensor();
  std::vector<TokenBatch> shards;
  std::vector<ActorMicroBatch> inputs;
  for (const MicroBatch& mb : plan_micro_batches(slice_rows(exp.batch, lo, hi),
                                                 micro_batch_options(stage_.cfg.train, stage_.policy.ctx.sp_size()))) {
    auto cut = [&](const at::Tensor& t) { return mb.gather_chunk(t.defined() ? t.slice(0, lo, hi) : t, stage_.policy.ctx.sp); };
    shards.push_back(sequence_shard(mb.tokens, stage_.policy.ctx.sp_rank(), stage_.policy.ctx.sp_size()));
    inputs.push_back({cut(exp.old_logp), cut(exp.advantages), cut(exp.ref_logp), cut(mask),
                      mb.gather_chunk(weights, stage_.policy.ctx.sp), cut(exp.behaviour_logp),
                      mb.gather_chunk(rows, stage_.policy.ctx.sp)});
  }
  // The micro-batch's loss and statistics from the policy's final hidden states
  // (with pp on the last stage only; sum_step_sums shares them after the update).
  auto micro_loss = [&](size_t i, const at::Tensor& hidden) {
    const ActorMicroBatch& u = inputs[i];
    auto lp = stage_.policy.model->token_logprobs(hidden, shards[i].targets, /*with_entropy=*/true,
                                            sampling_temperature(stage_.cfg));
    PolicyLossInputs in{lp.logprobs, u.old_logp, u.advantages, u.mask, u.ref_logp, lp.entropy, u.behaviour_logp};
    if (seq_ratio)
      in.seq_log_ratio = sequence_log_ratio(lp.logprobs - u.old_logp, u.mask, u.rows, row_tokens, stage_.policy.ctx.sp);
    PolicyLossOutput po = policy_loss(in, pl);
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
