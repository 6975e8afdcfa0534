// The PPO critic's update and metrics (critic_update.h).
#include "hpcrl/algo/training/critic_update.h"

#include <torch/utils.h>

#include <algorithm>

#include "hpcrl/algo/training/forward_backward.h"
#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
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

}  // namespace

CriticSums critic_update(const CriticTrainer& who, const TokenBatch& batch, const ValueTargets& target,
                         int64_t iteration) {
  const config::PpoStage& cfg = who.cfg;
  Role& critic = who.critic;
  const int64_t n_mini = who.n_mini;
  trace::ScopedSpan span("ppo/critic_update");
  CriticSums sums;
  const int64_t B = batch.rows();
  const MicroBatchOptions micro = micro_batch_options(cfg.train, critic.ctx.sp_size());
  int64_t step = iteration * cfg.epochs * n_mini;
  for (int64_t epoch = 0; epoch < cfg.epochs; ++epoch) {
    for (int64_t k = 0; k < n_mini; ++k, ++step) {
      const int64_t lo = k * B / n_mini, hi = (k + 1) * B / n_mini;
      const double den = std::max(1.0, sum_over_dp(critic, target.mask.slice(0, lo, hi).sum().item<double>()));
      critic_forward_backward(critic, who.trainer, batch, target, lo, hi, micro, den, sums);
      who.trainer.finish_step("ppo_critic", step, who.world_rank);
    }
  }
  return sums;
}


std::vector<std::pair<std::string, double>> critic_loss_metrics(const config::PpoStage& cfg, const Role& critic,
                                                                const CriticSums& local, double tokens, int64_t n_mini) {
  const auto tot = sum_step_sums(critic, local);  // each sp rank's share of its replica's rows
  return {{"critic/loss", tot.loss / double(cfg.epochs * n_mini)},
          {"critic/clip_frac", tot.clipped_tokens / (std::max(1.0, tokens) * cfg.epochs)}};
}

double response_tokens(const Role& policy, const at::Tensor& mask) {
  return std::max(1.0, sum_over_dp(policy, mask.sum().to(at::kCPU, at::kDouble).reshape({1})).item<double>());
}

double values_mean(const Role& policy, const at::Tensor& old_values, const at::Tensor& mask, double tokens) {
  return sum_over_dp(policy, (old_values * mask).sum().to(at::kCPU, at::kDouble).reshape({1})).item<double>() / tokens;
}

void check_critic(const StageEnv& env, const Role& policy, const Role& critic) {
  HPCRL_CHECK_INPUT(!critic.member() || critic.model->options().value_head,
                    env.stage->path << ".critic: role '" << critic.name << "' has no value head; give it head: value");
  HPCRL_CHECK_INPUT(critic.mesh.dp() == policy.mesh.dp(), env.stage->path << ": critic dp=" << critic.mesh.dp()
                    << " differs from policy dp=" << policy.mesh.dp() << "; use layouts with the same dp size");
}

}  // namespace hpcrl::algo
