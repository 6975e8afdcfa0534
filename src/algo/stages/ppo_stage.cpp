// The PPO stage loop (see ppo_stage.h).
#include "hpcrl/algo/stages/ppo_stage.h"

#include <fmt/format.h>
#include <torch/utils.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "hpcrl/algo/objectives/advantages.h"
#include "hpcrl/algo/training/critic_update.h"
#include "hpcrl/algo/training/forward_backward.h"
#include "hpcrl/algo/training/pipeline_train.h"
#include "hpcrl/algo/stages/policy_run.h"
#include "hpcrl/algo/remote/remote_critic.h"
#include "hpcrl/algo/remote/remote_reference.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/training/value_pass.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
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

}  // namespace

StageResult run_ppo(StageEnv& env) {
  const config::PpoStage& cfg = env.stage->ppo;
  Role& policy = env.role(cfg.policy);
  Role& critic = env.role(cfg.critic);
  Role* reference = cfg.reference.empty() ? nullptr : &env.role(cfg.reference);
  PolicyStage stage(env, cfg, policy, reference, env.data(cfg.data), "ppo", rollout_role_of(env, cfg.policy));
  const bool critic_apart = on_own_ranks(critic, policy);  // values and updates come from its ranks
  check_critic(env, policy, critic);
  if (!critic_apart) check_same_rows(env.world, policy, critic, env.stage->path);  // it scores the policy's rows
  if (reference && !on_own_ranks(*reference, policy)) check_same_rows(env.world, policy, *reference, env.stage->path);
  const int64_t n_mini = stage.minibatches_per_epoch();
  const int64_t steps = cfg.iterations * cfg.epochs * n_mini;
  std::optional<Trainer> actor, critic_trainer;
  if (policy.member()) actor.emplace(policy, cfg.train, steps);
  if (critic.member()) critic_trainer.emplace(critic, cfg.train, steps, cfg.critic_lr);
  std::unique_ptr<RemoteCritic> remote;
  if (critic_apart) remote = std::make_unique<RemoteCritic>(critic, policy, env.world->size(), cfg, "ppo");
  PolicyTraining training;
  training.saved = {{&policy, actor ? &actor->optimizer() : nullptr},
                    {&critic, critic_trainer ? &critic_trainer->optimizer() : nullptr}};
  const PolicyLossConfig pl = policy_loss_config(cfg);
  training.train = [&](Experience& exp, RlMetrics& m, int64_t it) {
    const at::Tensor& mask = exp.batch.loss_mask;
    at::Tensor old_values;
    {
      trace::ScopedSpan span("ppo/values");
      old_values = (remote ? remote->values(exp.batch)
                           : forward_values(critic, exp.batch, micro_batch_options(cfg.train, critic.ctx.sp_size()))) *
                   mask;
    }
    const GaeResult g = ppo_advantages(cfg, reference != nullptr, old_values, exp);
    if (it >= cfg.critic_warmup) stage.update(exp, *actor, pl, it, m);
    const double tokens = response_tokens(policy, mask);
    if (remote) {
      for (const auto& kv : remote->update(exp.batch, g.returns)) m.extra.push_back(kv);
    } else {
      const ValueTargets target{mask, old_values, g.returns, cfg.value_clip};
      const CriticSums sums = critic_update(cfg, critic, *critic_trainer, exp.batch, target, it, n_mini, env.world->rank());
      for (const auto& kv : critic_loss_metrics(cfg, critic, sums, tokens, n_mini)) m.extra.push_back(kv);
    }
    m.extra.emplace_back("critic/values_mean", values_mean(policy, old_values, mask, tokens));
    if (actor && actor->skips_nonfinite())
      m.extra.emplace_back("nonfinite/skipped_steps", double(actor->skipped_steps()));
  };
  if (remote && critic.member()) training.serve = [&](int64_t it) { remote->serve(*critic_trainer, it, n_mini); };
  training.lr = [&](int64_t it) { return actor->lr(it * cfg.epochs * n_mini); };
  return run_policy_stage(env, stage, training);
}

}  // namespace hpcrl::algo
