// Shared optimizer-step machinery (see train_step.h).
#include "hpcrl/algo/training/train_step.h"

#include <fmt/format.h>

#include <torch/utils.h>

#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdlib>
#include <exception>
#include <limits>

#include "hpcrl/model/pipeline_stage.h"
#include "hpcrl/optim/adamw.h"
#include "hpcrl/optim/sharded_adamw.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::algo {

namespace {
const char* const kTiedEmbedding = "model.embed_tokens.weight";
}  // namespace

namespace {

optim::AdamWOptions adamw_options(const Role& role, const config::TrainHparams& hp, double lr_override) {
  const auto& oc = role.config->optim;
  optim::AdamWOptions o;
  o.lr = lr_override > 0 ? lr_override : hp.lr;
  o.beta1 = oc.beta1;
  o.beta2 = oc.beta2;
  o.eps = oc.eps;
  o.weight_decay = hp.weight_decay;
  return o;
}

// optim.zero 1, 2 or 3: the same groups and the same 1/ep on expert gradients
// as plain AdamW's, as reduce-scatters (checkpoint keys "zero1.*", "zero2.*").
std::vector<optim::ShardGroup> zero_groups(Role& role, int zero) {
  // Expert weights differ across the ep group: their gradients (already summed
  // over ep by the token exchange) are reduced only over edp replicas.
  optim::ParamSet dense, experts;
  for (const auto& p : role.param_set()) (p.sharding == optim::Sharding::kExpert ? experts : dense).push_back(p);
  const std::string prefix = "zero" + std::to_string(zero);
  // Replica keys: the dense group spans the dp·sp ranks of one (tp, pp) slot, an expert group its ep rank's.
  const int64_t tp = role.ctx.tp_rank(), pp = role.ctx.pp_rank(), ep = role.ctx.ep_rank();
  std::vector<optim::ShardGroup> groups{{prefix + ".dense", dense, role.ctx.grad, 1.0, {}, {}, {tp, pp}}};
  if (!experts.empty())
    groups.push_back({prefix + ".experts", experts, role.edp, double(role.ctx.ep_size()), {}, {}, {tp, pp, ep}});
  if (zero == 3)
    for (auto& g : groups)
      for (const auto& p : g.params) g.units.push_back(model::parameter_unit_of(p.name));
  if (zero >= 2 && model::trains_tied_pipeline_embedding(*role.model)) {
    std::vector<bool>& alone = groups.front().alone;
    alone.assign(dense.size(), false);
    bool found = false;
    for (size_t k = 0; k < dense.size(); ++k)
      if (dense[k].name == kTiedEmbedding) alone[k] = found = true;
    HPCRL_CHECK(found, "role '" << role.name << "': the tied embedding " << kTiedEmbedding
                                << " is not among its trained parameters");
  }
  return groups;
}

optim::LrDecay lr_decay(config::LrSchedule schedule) {
  switch (schedule) {
    case config::LrSchedule::constant: return optim::LrDecay::kConstant;
    case config::LrSchedule::linear: return optim::LrDecay::kLinear;
    case config::LrSchedule::cosine: return optim::LrDecay::kCosine;
  }
  return optim::LrDecay::kConstant;
}

}  // namespace

Trainer::Trainer(Role& role, const config::TrainHparams& hp, int64_t total_steps, double lr_override)
    : role_(role),
      grad_clip_(hp.grad_clip),
      max_skips_(hp.on_nonfinite == config::OnNonFinite::skip_step ? hp.max_consecutive_skips : 0) {
  const auto& oc = role.config->optim;
  const optim::AdamWOptions o = adamw_options(role, hp, lr_override);
  if (oc.zero > 0) {
    std::vector<optim::ShardGroup> groups = zero_groups(role, int(oc.zero));
    sums_tied_shards_ = !groups.front().alone.empty();
    auto sharded = std::make_unique<optim::ShardedAdamW>(std::move(groups), o, int(oc.zero), oc.bucket_bytes());
    if (oc.zero == 3) zero3_ = Zero3Units::install(*role.model, *sharded, role.ctx.grad);
    optimizer_ = std::move(sharded);
  } else {
    optim::GradientGroups groups{role.ctx.grad, role.edp, double(role.ctx.ep_size()), size_t(oc.bucket_bytes())};
    auto adamw = std::make_unique<optim::AdamW>(role.param_set(), o, std::move(groups));
    adamw->set_replica({role.ctx.tp_rank(), role.ctx.pp_rank(), role.ctx.ep_rank()});
    optimizer_ = std::move(adamw);
  }
  schedule_.kind = lr_decay(hp.schedule);
  schedule_.lr = o.lr;
  schedule_.warmup_steps = hp.warmup;
  schedule_.total_steps = total_steps;
  schedule_.min_lr_ratio = hp.min_lr_ratio;
}

Trainer::~Trainer() {
  if (!zero3_) return;
  if (std::uncaught_exceptions() > 0) {
    role_.model->set_parameter_units(nullptr);
    return;
  }
  zero3_->uninstall();
}

double Trainer::finish_step(const std::string& stage, int64_t step, int world_rank) {
  {
    trace::ScopedSpan span(stage + "/grad_sync");
    optimizer_->reduce_gradients();
    sum_tied_gradient_shards();
  }
  trace::ScopedSpan span(stage + "/optimizer");
  inject_nonfinite_for_test(stage, step, world_rank);
  double norm = optimizer_->clip_grad_norm(grad_clip_, role_.ctx);
  if (accept_norm(norm, stage, step, world_rank)) optimizer_->step(schedule_.at(step));
  optimizer_->zero_grad();
  if (zero3_) zero3_->release_frozen();
  return norm;
}

void Trainer::sum_tied_gradient_shards() {
  if (!sums_tied_shards_) return;
  torch::NoGradGuard no_grad;
  at::Tensor shard = optimizer_->reduced_gradient(kTiedEmbedding);
  model::add_tied_peer(*role_.model, shard);
}

bool Trainer::accept_norm(double norm, const std::string& stage, int64_t step, int world_rank) {
  // Agreed over the gradient group, so its ranks skip or stop together even when
  // only one of them saw the NaN (a test hook's, or one that the sync did not spread).
  at::Tensor finite = at::full({1}, std::isfinite(norm) ? 1 : 0, at::kInt);
  dist::all_reduce(role_.ctx.grad, finite, dist::ReduceOp::kMin);
  if (finite.item<int>() != 0) {
    skipped_in_a_row_ = 0;
    return true;
  }
  const std::string what = fmt::format("stage {} step {}: the gradient norm of role '{}' is {} on rank {} ({})", stage,
                                       step, role_.name, norm, world_rank, nonfinite_tensor());
  if (max_skips_ > 0 && skipped_in_a_row_ < max_skips_) {
    ++skipped_;
    ++skipped_in_a_row_;
    spdlog::warn("{}; on_nonfinite: skip_step: this update is skipped ({} in a row, at most {})", what,
                 skipped_in_a_row_, max_skips_);
    return false;
  }
  if (max_skips_ > 0)
    throw RuntimeError(fmt::format("{}, after {} skipped steps in a row (on_nonfinite: skip_step, "
                                   "max_consecutive_skips: {}); the run is diverging or the data is bad: lower the "
                                   "learning rate or check the data, then resume from the last checkpoint",
                                   what, skipped_in_a_row_, max_skips_));
  // Clipping rescales a finite norm; it cannot repair a NaN or an inf, so with
  // grad_clip on the hint is about the step size and the data.
  // Weights that already hold a NaN or an inf came in that way, whatever the step size.
  if (const std::string weight = nonfinite_weight(); !weight.empty())
    throw RuntimeError(fmt::format("{}; the weights of role '{}' already hold non-finite values (first: {}), so no "
                                   "learning rate helps: they were loaded that way (the init weights, or a checkpoint "
                                   "read without its manifest's checksums) or an earlier update made them so; check "
                                   "the weights this stage started from",
                                   what, role_.name, weight));
  const std::string fix = grad_clip_ > 0
                              ? "grad_clip (" + fmt::format("{}", grad_clip_) +
                                    ") is on but cannot rescale a non-finite gradient: lower the learning rate "
                                    "or check the data for empty or overlong rows"
                              : "lower the learning rate, set grad_clip (e.g. 1.0), or check the data for empty rows";
  throw RuntimeError(fmt::format("{}; {} (or set on_nonfinite: skip_step to skip such steps)", what, fix));
}

std::string Trainer::nonfinite_weight() const {
  torch::NoGradGuard no_grad;
  for (const auto& p : role_.model->named_parameters()) {
    const at::Tensor& w = p.value();
    if (w.defined() && w.numel() > 0 && !at::isfinite(w).all().item<bool>()) return p.key();
  }
  return "";
}

std::string Trainer::nonfinite_tensor() const {
  const std::string found = optimizer_->first_nonfinite_gradient();
  if (!found.empty()) return "first non-finite: " + found;
  return "this rank's gradients are finite: the non-finite values are on another rank of the role";
}

void Trainer::inject_nonfinite_for_test(const std::string& stage, int64_t step, int world_rank) {
  static const char* spec = std::getenv("HPCRL_TEST_NONFINITE_GRAD");
  if (!spec) return;
  // STAGE:STEP[,STEP...][@RANK]
  const std::string s = spec;
  const size_t colon = s.find(':'), at = s.find('@');
  if (colon == std::string::npos || s.substr(0, colon) != stage) return;
  if (at != std::string::npos && std::stoi(s.substr(at + 1)) != world_rank) return;
  const std::string steps = s.substr(colon + 1, at == std::string::npos ? std::string::npos : at - colon - 1);
  bool due = false;
  for (const auto& t : str::split(steps, ',')) due |= !t.empty() && std::stoll(t) == step;
  if (!due) return;
  // Into the first buffer the norm and the update read (a gradient, or a reduced shard).
  torch::NoGradGuard no_grad;
  const std::vector<at::Tensor> grads = optimizer_->reduced_gradients();
  if (!grads.empty()) grads.front().view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
}

}  // namespace hpcrl::algo
