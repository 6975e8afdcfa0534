// Shared optimizer-step machinery (see train_step.h).
#include "hpcrl/algo/train_step.h"

#include <torch/torch.h>

#include <cmath>

#include "hpcrl/optim/grad_clip.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

Trainer::Trainer(Role& role, const config::TrainHparams& hp, int64_t total_steps, double lr_override)
    : role_(role), params_(role.param_set()), grad_clip_(hp.grad_clip) {
  const auto& oc = role.config->optim;
  HPCRL_CHECK_INPUT(!oc.zero1, "models." << role.name << ".optim.zero1: optimizer-state sharding is not available "
                    "in this build; set zero1: false");
  optim::AdamWOptions o;
  o.lr = lr_override > 0 ? lr_override : hp.lr;
  o.beta1 = oc.beta1;
  o.beta2 = oc.beta2;
  o.eps = oc.eps;
  o.weight_decay = hp.weight_decay;
  optimizer_ = std::make_unique<optim::AdamW>(params_, o);
  // Expert weights differ across the ep group: their gradients (already summed
  // over ep by the token exchange) are reduced only over edp replicas.
  optim::ParamSet dense, experts;
  for (const auto& p : params_) (p.sharding == optim::Sharding::kExpert ? experts : dense).push_back(p);
  sync_ = std::make_unique<optim::GradSync>(dense, role.ctx.grad);
  expert_sync_ = std::make_unique<optim::GradSync>(experts, role.edp);
  expert_params_ = experts;
  schedule_.kind = config::to_string(hp.schedule);
  schedule_.lr = o.lr;
  schedule_.warmup_steps = hp.warmup;
  schedule_.total_steps = total_steps;
  schedule_.min_lr_ratio = hp.min_lr_ratio;
}

double Trainer::finish_step(const std::string& stage, int64_t step, int world_rank) {
  {
    trace::ScopedSpan span(stage + "/grad_sync");
    sync_->finish();
    expert_sync_->finish();
    // Averaged over edp so far; the dense parameters' denominator is dp·sp = ep·edp.
    if (role_.ctx.ep_size() > 1) {
      torch::NoGradGuard no_grad;
      for (auto& p : expert_params_)
        if (p.tensor.grad().defined()) p.tensor.mutable_grad().div_(double(role_.ctx.ep_size()));
    }
  }
  trace::ScopedSpan span(stage + "/optimizer");
  double norm = optim::clip_grad_norm(params_, grad_clip_, role_.ctx);
  HPCRL_CHECK(std::isfinite(norm), "non-finite gradient norm (" << norm << ") in stage " << stage << " at step "
              << step << " on rank " << world_rank << " (role " << role_.name
              << "): lower the learning rate, enable grad_clip, or check the data for empty responses");
  optimizer_->step(schedule_.at(step));
  optimizer_->zero_grad();
  return norm;
}

}  // namespace hpcrl::algo
