// The PPO stage loop (see ppo_stage.h).
#include "hpcrl/algo/ppo_stage.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "hpcrl/algo/advantages.h"
#include "hpcrl/algo/forward_backward.h"
#include "hpcrl/algo/pipeline_train.h"
#include "hpcrl/algo/policy_run.h"
#include "hpcrl/algo/role_sums.h"
#include "hpcrl/algo/value_pass.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
// What the critic's steps of one iteration add up (over the grad group after the last).
struct CriticSums {
  double loss = 0;            // Σ micro-batch loss numerators / den
  double clipped_tokens = 0;  // tokens where the clipped value's error is the larger
};

// What the critic's clipped value loss compares its values with: the batch's
// [B, T] loss mask, the values of the rollout (old_values) and the GAE returns.
struct ValueTargets {
  const at::Tensor& mask;
  const at::Tensor& old_values;
  const at::Tensor& returns;
  double clip;  // value_clip; 0 = unclipped
};

// The critic's forward and backward on rows [lo, hi) of `batch` (one optimizer
// step's mini-batch; finish_step is the caller's): micro-batches as `micro`
// plans them (trimmed or packed), through the critic's pipeline at pp > 1 (the
// value head and the loss on the last stage). Loss 0.5·max((v − R)², (v_clip − R)²)
// summed over this rank's tokens, divided by `den` (the mini-batch's global
// tokens) and scaled by the gradient group as the policy loss is. Adds this
// rank's share to `sums` (at pp > 1 on the last stage only).
void critic_forward_backward(Role& critic, Trainer& trainer, const TokenBatch& batch, const ValueTargets& target,
                             int64_t lo, int64_t hi, MicroBatchOptions micro, double den, CriticSums& sums) {
  const double grad_group = critic.ctx.grad ? critic.ctx.grad->size() : 1;
  const int sp = critic.ctx.sp_size();
  micro.multiple = sp;
  // Each micro-batch's sp shard, and its targets in its layout (this sp rank's columns).
  struct MicroTargets {
    at::Tensor mask, old_values, returns;
  };
  std::vector<TokenBatch> shards;
  std::vector<MicroTargets> targets;
  for (const MicroBatch& mb : plan_micro_batches(slice_rows(batch, lo, hi), micro)) {
    auto cut = [&](const at::Tensor& t) { return mb.gather_chunk(t.slice(0, lo, hi), critic.ctx.sp); };
    shards.push_back(sequence_shard(mb.tokens, critic.ctx.sp_rank(), sp));
    targets.push_back({cut(target.mask), cut(target.old_values), cut(target.returns)});
  }
  // A micro-batch's loss from the critic's values v [R, L/sp] of its final hidden states.
  auto micro_loss = [&](size_t i, const at::Tensor& hidden) {
    const MicroTargets& u = targets[i];
    const at::Tensor v = critic.model->values(hidden);
    const at::Tensor clipped =
        target.clip > 0 ? u.old_values + (v - u.old_values).clamp(-target.clip, target.clip) : v;
    const at::Tensor per_tok = at::maximum((v - u.returns).pow(2), (clipped - u.returns).pow(2)) * 0.5;
    at::Tensor loss = (per_tok * u.mask).sum() * (grad_group / den);
    sums.loss += loss.item<double>() / grad_group;
    sums.clipped_tokens +=
        ((((clipped - u.returns).pow(2)) > ((v - u.returns).pow(2))).to(at::kFloat) * u.mask).sum().item<double>();
    return loss;
  };
  forward_backward(critic, trainer, shards, micro_loss);
}

// The critic's cfg.epochs passes over the experience in mini-batches, one
// optimizer step each (token mean over the mini-batch's global tokens).
CriticSums critic_update(const config::PpoStage& cfg, Role& critic, Trainer& trainer, const Experience& exp,
                         const ValueTargets& target, int64_t iteration, int64_t n_mini, int world_rank) {
  trace::ScopedSpan span("ppo/critic_update");
  CriticSums sums;
  const int64_t B = exp.batch.rows();
  const MicroBatchOptions micro = micro_batch_options(cfg.train, critic.ctx.sp_size());
  int64_t step = iteration * cfg.epochs * n_mini;
  for (int64_t epoch = 0; epoch < cfg.epochs; ++epoch) {
    for (int64_t k = 0; k < n_mini; ++k, ++step) {
      const int64_t lo = k * B / n_mini, hi = (k + 1) * B / n_mini;
      const double den = std::max(1.0, sum_over_dp(critic, target.mask.slice(0, lo, hi).sum().item<double>()));
      critic_forward_backward(critic, trainer, exp.batch, target, lo, hi, micro, den, sums);
      trainer.finish_step("ppo_critic", step, world_rank);
    }
  }
  return sums;
}

// GAE advantages and returns from the critic's values of the rollout and the
// sequence rewards (with the KL to the reference per token when in the reward).
GaeResult ppo_advantages(const config::PpoStage& cfg, bool has_reference, const at::Tensor& old_values,
                         Experience& exp) {
  const at::Tensor& mask = exp.batch.loss_mask;
  at::Tensor kl = has_reference && cfg.kl.in_reward ? kl_estimate(exp.old_logp, exp.ref_logp, cfg.kl.estimator)
                                                    : at::zeros(mask.sizes(), mask.options());
  trace::ScopedSpan span("ppo/advantage");
  at::Tensor rewards = kl_shaped_rewards(exp.scores, kl, mask, cfg.kl.in_reward ? cfg.kl.coef : 0.0);
  GaeResult g = gae(rewards, old_values, mask, cfg.gamma, cfg.lam, /*whiten=*/true);
  exp.advantages = g.advantages;
  return g;
}

// critic/loss, critic/clip_frac and critic/values_mean of one iteration.
void add_critic_metrics(const config::PpoStage& cfg, const Role& critic, const Role& policy, const CriticSums& local,
                        const at::Tensor& old_values, const at::Tensor& mask, int64_t n_mini, RlMetrics& m) {
  const auto tot = sum_step_sums(critic, local);  // each sp rank's share of its replica's rows
  const double tokens =
      std::max(1.0, sum_over_dp(policy, mask.sum().to(at::kCPU, at::kDouble).reshape({1})).item<double>());
  m.extra.emplace_back("critic/loss", tot.loss / double(cfg.epochs * n_mini));
  m.extra.emplace_back("critic/clip_frac", tot.clipped_tokens / (tokens * cfg.epochs));
  m.extra.emplace_back(
      "critic/values_mean",
      sum_over_dp(policy, (old_values * mask).sum().to(at::kCPU, at::kDouble).reshape({1})).item<double>() / tokens);
}

void check_critic(const StageEnv& env, const Role& policy, const Role& critic) {
  HPCRL_CHECK_INPUT(critic.member() && critic.model->options().value_head,
                    env.stage->path << ".critic: role '" << critic.name
                                    << "' has no value head on this rank; give it head: value and place it on every rank");
  HPCRL_CHECK_INPUT(critic.mesh.dp() == policy.mesh.dp(), env.stage->path << ": critic dp=" << critic.mesh.dp()
                    << " differs from policy dp=" << policy.mesh.dp() << "; use layouts with the same dp size");
}
}  // namespace

StageResult run_ppo(StageEnv& env) {
  const config::PpoStage& cfg = env.stage->ppo;
  Role& policy = env.role(cfg.policy);
  Role& critic = env.role(cfg.critic);
  Role* reference = cfg.reference.empty() ? nullptr : &env.role(cfg.reference);
  PolicyStage stage(env, cfg, policy, reference, env.data(cfg.data), "ppo", rollout_role_of(env, cfg.policy));
  if (stage.trains()) check_critic(env, policy, critic);
  check_same_rows(env.world, policy, critic, env.stage->path);  // the critic scores the policy's rows
  if (reference) check_same_rows(env.world, policy, *reference, env.stage->path);
  const int64_t n_mini = stage.minibatches_per_epoch();
  const int64_t steps = cfg.iterations * cfg.epochs * n_mini;
  std::optional<Trainer> actor, critic_trainer;
  PolicyTraining training;
  if (stage.trains()) {
    actor.emplace(policy, cfg.train, steps);
    critic_trainer.emplace(critic, cfg.train, steps, cfg.critic_lr);
    training.saved = {{&policy, &actor->optimizer()}, {&critic, &critic_trainer->optimizer()}};
  }
  const PolicyLossConfig pl = policy_loss_config(cfg);
  training.train = [&](Experience& exp, RlMetrics& m, int64_t it) {
    const at::Tensor& mask = exp.batch.loss_mask;
    at::Tensor old_values;
    {
      trace::ScopedSpan span("ppo/values");
      old_values = forward_values(critic, exp.batch, micro_batch_options(cfg.train, critic.ctx.sp_size())) * mask;
    }
    const GaeResult g = ppo_advantages(cfg, reference != nullptr, old_values, exp);
    if (it >= cfg.critic_warmup) stage.update(exp, *actor, pl, it, m);
    const ValueTargets target{mask, old_values, g.returns, cfg.value_clip};
    const CriticSums sums = critic_update(cfg, critic, *critic_trainer, exp, target, it, n_mini, env.world->rank());
    add_critic_metrics(cfg, critic, policy, sums, old_values, mask, n_mini, m);
  };
  training.lr = [&](int64_t it) { return actor->lr(it * cfg.epochs * n_mini); };
  return run_policy_stage(env, stage, training);
}

}  // namespace hpcrl::algo
