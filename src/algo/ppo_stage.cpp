// The PPO stage loop (see ppo_stage.h).
#include "hpcrl/util/check.h"
#include "hpcrl/algo/ppo_stage.h"

#include <torch/torch.h>

#include <chrono>

#include "hpcrl/algo/advantages.h"
#include "hpcrl/algo/rl_common.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/algo/stage_loop.h"

namespace hpcrl::algo {

namespace {
// Critic values of the batch's positions [B, T] (no grad), aligned with loss_mask.
at::Tensor critic_values(Role& critic, const TokenBatch& b, int64_t micro_batch, bool grad) {
  const int sp = critic.ctx.sp_size();
  const int64_t B = b.rows(), micro = micro_batch > 0 ? micro_batch : std::max<int64_t>(1, B);
  std::vector<at::Tensor> parts;
  for (int64_t m = 0; m < B; m += micro) {
    TokenBatch mb = sequence_shard(slice_rows(b, m, std::min(B, m + micro)), critic.ctx.sp_rank(), sp);
    at::Tensor v = critic.model->values(critic.model->forward(mb.ids).hidden);  // [b, T/sp]
    if (!grad && sp > 1) v = critic.ctx.sp->all_gather(v.contiguous(), 1);
    parts.push_back(v);
  }
  return B == 0 ? at::zeros(b.loss_mask.sizes(), b.loss_mask.options()) : at::cat(parts, 0);
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
  HPCRL_CHECK_INPUT(critic.member() && critic.model->score, env.stage->path << ".critic: role '" << critic.name
                    << "' has no value head on this rank; give it head: value and place it on every rank");
  HPCRL_CHECK_INPUT(critic.dp_size == policy.dp_size, env.stage->path << ": critic dp=" << critic.dp_size
                    << " differs from policy dp=" << policy.dp_size << "; use layouts with the same dp size");

  RlLoop loop(env, cfg, policy, reference, data, "ppo");
  const int64_t n_mini = loop.minibatches_per_epoch();
  Trainer actor(policy, cfg.train, cfg.iterations * cfg.epochs * n_mini);
  Trainer critic_trainer(critic, cfg.train, cfg.iterations * cfg.epochs * n_mini, cfg.critic_lr);
  std::vector<TrainedRole> saved{{&policy, &actor.optimizer()}, {&critic, &critic_trainer.optimizer()}};
  int64_t start = loop.resume(saved);

  const PolicyLossConfig pl = policy_loss_config(cfg);
  const double grad_group = critic.ctx.grad ? critic.ctx.grad->size() : 1;

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
      torch::NoGradGuard no_grad;
      old_values = critic_values(critic, exp.batch, cfg.train.micro_batch, false) * mask;
    }
    at::Tensor kl = reference && cfg.kl.in_reward
                        ? kl_estimate(exp.old_logp, exp.ref_logp, parse_kl_estimator(config::to_string(cfg.kl.estimator)))
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
    double vloss_sum = 0, vclip_sum = 0;
    {
      trace::ScopedSpan span("ppo/critic_update");
      const int64_t B = exp.batch.rows();
      int64_t step = it * cfg.epochs * n_mini;
      for (int64_t epoch = 0; epoch < cfg.epochs; ++epoch) {
        for (int64_t k = 0; k < n_mini; ++k, ++step) {
          const int64_t lo = k * B / n_mini, hi = (k + 1) * B / n_mini;
          double den_local = mask.slice(0, lo, hi).sum().item<double>();
          const double den = std::max(1.0, loop.dp_sum(at::full({1}, den_local, at::kDouble)).item<double>());
          critic_trainer.begin_micro_batch(true);
          if (hi > lo) {
            TokenBatch sub = slice_rows(exp.batch, lo, hi);
            TokenBatch sb = sequence_shard(sub, critic.ctx.sp_rank(), critic.ctx.sp_size());
            at::Tensor v = critic.model->values(critic.model->forward(sb.ids).hidden);  // [b, T/sp]
            const int sp = critic.ctx.sp_size();
            const int64_t chunk = sub.ids.size(1) / sp, c0 = critic.ctx.sp_rank() * chunk;
            auto cols = [&](const at::Tensor& t) { return t.slice(0, lo, hi).slice(1, c0, c0 + chunk); };
            at::Tensor msk = cols(mask);
            at::Tensor old_v = cols(old_values), ret = cols(g.returns);
            at::Tensor clipped = cfg.value_clip > 0 ? old_v + (v - old_v).clamp(-cfg.value_clip, cfg.value_clip) : v;
            at::Tensor per_tok = at::maximum((v - ret).pow(2), (clipped - ret).pow(2)) * 0.5;
            at::Tensor loss = (per_tok * msk).sum() * (grad_group / den);
            loss.backward();
            vloss_sum += loss.item<double>() / grad_group;
            vclip_sum += ((((clipped - ret).pow(2)) > ((v - ret).pow(2))).to(at::kFloat) * msk).sum().item<double>();
          }
          critic_trainer.finish_step("ppo_critic", step, env.world->rank());
        }
      }
    }
    at::Tensor vs = loop.dp_sum(at::tensor({vloss_sum, vclip_sum, mask.sum().item<double>()}, at::kDouble));
    m.extra.emplace_back("critic/loss", vs[0].item<double>() / double(cfg.epochs * n_mini));
    m.extra.emplace_back("critic/clip_frac", vs[1].item<double>() / std::max(1.0, vs[2].item<double>() * cfg.epochs));
    m.extra.emplace_back("critic/values_mean",
                         loop.dp_sum((old_values * mask).sum().to(at::kCPU, at::kDouble).reshape({1})).item<double>() /
                             std::max(1.0, vs[2].item<double>()));
    m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    loop.write_metrics(it + 1, m, actor.lr(it * cfg.epochs * n_mini));
    return "reward " + std::to_string(m.reward_mean).substr(0, 5);
  };
  run_stage_loop(env, steps, result);
  return result;
}

}  // namespace hpcrl::algo
