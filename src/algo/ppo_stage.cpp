// The PPO stage loop (see ppo_stage.h).
#include "hpcrl/util/check.h"
#include "hpcrl/algo/ppo_stage.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "hpcrl/algo/advantages.h"
#include "hpcrl/algo/forward_backward.h"
#include "hpcrl/algo/pipeline_train.h"
#include "hpcrl/algo/rl_common.h"
#include "hpcrl/algo/stage_loop.h"
#include "hpcrl/algo/step_sums.h"
#include "hpcrl/algo/value_pass.h"
#include "hpcrl/trace/trace.h"

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
  // Each micro-batch's tokens and targets in its layout, this sp rank's columns.
  struct Micro {
    TokenBatch tokens;
    at::Tensor mask, old_values, returns;
  };
  std::vector<Micro> micros;
  for (const MicroBatch& mb : plan_micro_batches(slice_rows(batch, lo, hi), micro)) {
    auto cut = [&](const at::Tensor& t) { return mb.gather_chunk(t.slice(0, lo, hi), critic.ctx.sp); };
    micros.push_back({sequence_shard(mb.tokens, critic.ctx.sp_rank(), sp), cut(target.mask), cut(target.old_values),
                      cut(target.returns)});
  }
  // A micro-batch's loss from the critic's values v [R, L/sp] of its final hidden states.
  auto micro_loss = [&](size_t i, const at::Tensor& hidden) {
    const Micro& u = micros[i];
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
  std::vector<TokenBatch> shards;
  for (const Micro& u : micros) shards.push_back(u.tokens);
  forward_backward(critic, trainer, shards, micro_loss);
}
}  // namespace

StageResult run_ppo(StageEnv& env) {
  const config::PpoStage& cfg = env.stage->ppo;
  const auto& pipeline = *env.pipeline;
  Role& policy = env.role(cfg.policy);
  Role& critic = env.role(cfg.critic);
  Role* reference = cfg.reference.empty() ? nullptr : &env.role(cfg.reference);
  const DataSplits& data = env.data(cfg.data);
  StageResult result;
  HPCRL_CHECK_INPUT(critic.member() && critic.model->options().value_head,
                    env.stage->path << ".critic: role '" << critic.name
                                    << "' has no value head on this rank; give it head: value and place it on every rank");
  HPCRL_CHECK_INPUT(critic.dp_size == policy.dp_size, env.stage->path << ": critic dp=" << critic.dp_size
                    << " differs from policy dp=" << policy.dp_size << "; use layouts with the same dp size");
  // The critic (and the reference) score the policy's experience rows.
  check_same_rows(env.world, policy, critic, env.stage->path);
  if (reference) check_same_rows(env.world, policy, *reference, env.stage->path);

  RlLoop loop(env, cfg, policy, reference, data, "ppo");
  const int64_t n_mini = loop.minibatches_per_epoch();
  Trainer actor(policy, cfg.train, cfg.iterations * cfg.epochs * n_mini);
  Trainer critic_trainer(critic, cfg.train, cfg.iterations * cfg.epochs * n_mini, cfg.critic_lr);
  std::vector<TrainedRole> saved{{&policy, &actor.optimizer()}, {&critic, &critic_trainer.optimizer()}};
  int64_t start = loop.resume(saved);

  const PolicyLossConfig pl = policy_loss_config(cfg);

  StageLoop steps = loop.stage_loop(start, saved, result);
  steps.step = [&](int64_t it) -> std::string {
    trace::ScopedSpan iter_span("ppo/iteration", {{"step", double(it)}});
    auto t0 = std::chrono::steady_clock::now();
    RlMetrics m;
    Experience exp = loop.collect(it, m);
    const at::Tensor& mask = exp.batch.loss_mask;

    at::Tensor old_values;
    {
      trace::ScopedSpan span("ppo/values");
      old_values = forward_values(critic, exp.batch, micro_batch_options(cfg.train, critic.ctx.sp_size())) * mask;
    }
    at::Tensor kl = reference && cfg.kl.in_reward
                        ? kl_estimate(exp.old_logp, exp.ref_logp, cfg.kl.estimator)
                        : at::zeros(mask.sizes(), mask.options());
    GaeResult g;
    {
      trace::ScopedSpan span("ppo/advantage");
      at::Tensor rewards = kl_shaped_rewards(exp.scores, kl, mask, cfg.kl.in_reward ? cfg.kl.coef : 0.0);
      g = gae(rewards, old_values, mask, cfg.gamma, cfg.lam, /*whiten=*/true);
      exp.advantages = g.advantages;
    }
    if (it >= cfg.critic_warmup) loop.update(exp, actor, pl, it, m);

    // Critic: clipped value loss, token mean over the global batch.
    CriticSums critic_sums;
    {
      trace::ScopedSpan span("ppo/critic_update");
      const int64_t B = exp.batch.rows();
      const ValueTargets target{mask, old_values, g.returns, cfg.value_clip};
      const MicroBatchOptions micro = micro_batch_options(cfg.train, critic.ctx.sp_size());
      int64_t step = it * cfg.epochs * n_mini;
      for (int64_t epoch = 0; epoch < cfg.epochs; ++epoch) {
        for (int64_t k = 0; k < n_mini; ++k, ++step) {
          const int64_t lo = k * B / n_mini, hi = (k + 1) * B / n_mini;
          double den_local = mask.slice(0, lo, hi).sum().item<double>();
          const double den = std::max(1.0, loop.dp_sum(at::full({1}, den_local, at::kDouble)).item<double>());
          critic_forward_backward(critic, critic_trainer, exp.batch, target, lo, hi, micro, den, critic_sums);
          critic_trainer.finish_step("ppo_critic", step, env.world->rank());
        }
      }
    }
    // Each sp rank's share of its dp replica's rows, computed on the last pp stage.
    at::Tensor packed = pack(critic_sums);
    share_from_last_stage(critic, packed);
    if (critic.ctx.grad && critic.ctx.grad->size() > 1) critic.ctx.grad->all_reduce(packed);
    const auto critic_tot = unpack<CriticSums>(packed);
    const double tokens = std::max(1.0, loop.dp_sum(mask.sum().to(at::kCPU, at::kDouble).reshape({1})).item<double>());
    m.extra.emplace_back("critic/loss", critic_tot.loss / double(cfg.epochs * n_mini));
    m.extra.emplace_back("critic/clip_frac", critic_tot.clipped_tokens / (tokens * cfg.epochs));
    m.extra.emplace_back("critic/values_mean",
                         loop.dp_sum((old_values * mask).sum().to(at::kCPU, at::kDouble).reshape({1})).item<double>() /
                             tokens);
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    loop.write_metrics(it + 1, m, actor.lr(it * cfg.epochs * n_mini));
    return fmt::format("reward {:.3f}", m.reward_mean);
  };
  run_stage_loop(env, steps, result);
  return result;
}

}  // namespace hpcrl::algo
