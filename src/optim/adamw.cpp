// AdamW update (see adamw.h). Matches torch.optim.AdamW(amsgrad=False, maximize=False):
//   p *= 1 - lr·wd;  m = β1 m + (1-β1) g;  v = β2 v + (1-β2) g²
//   p -= lr/(1-β1^t) · m / (sqrt(v)/sqrt(1-β2^t) + eps)
#include "hpcrl/optim/adamw.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <cmath>

#include "hpcrl/optim/adamw_multi_tensor.h"
#include "hpcrl/optim/grad_clip.h"
#include "hpcrl/parallel/host_threads.h"
#include "hpcrl/util/check.h"
#include "optim/adamw_fused.h"

namespace hpcrl::optim {

AdamW::AdamW(ParamSet params, AdamWOptions options, GradientGroups groups)
    : params_(std::move(params)), options_(options), expert_divisor_(groups.expert_divisor) {
  ParamSet dense;
  for (const auto& p : params_) (p.sharding == Sharding::kExpert ? expert_params_ : dense).push_back(p);
  dense_sync_ = std::make_unique<GradSync>(dense, groups.dense, groups.bucket_bytes);
  expert_sync_ = std::make_unique<GradSync>(expert_params_, groups.experts, groups.bucket_bytes);
  slots_.reserve(params_.size());
  std::vector<at::Tensor> weights;
  for (const auto& p : params_) {
    Slot s;
    auto opts = p.tensor.options().dtype(at::kFloat);
    s.exp_avg = at::zeros(p.tensor.sizes(), opts);
    s.exp_avg_sq = at::zeros(p.tensor.sizes(), opts);
    if (p.tensor.scalar_type() != at::kFloat && p.tensor.scalar_type() != at::kDouble)
      s.master = p.tensor.detach().to(at::kFloat).clone();
    weights.push_back(s.master.defined() ? s.master : p.tensor);
    slots_.push_back(std::move(s));
  }
  kernel_ = adamw_kernel_for(weights);
}

void adamw_update_with_ops(at::Tensor& w, const at::Tensor& g, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                           double lr, int64_t step, const AdamWOptions& o) {
  const double bc1 = 1.0 - std::pow(o.beta1, double(step));
  const double bc2 = 1.0 - std::pow(o.beta2, double(step));
  const double step_size = lr / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  at::Tensor g32 = g.scalar_type() == w.scalar_type() ? g : g.to(w.scalar_type());
  if (o.weight_decay != 0.0) w.mul_(1.0 - lr * o.weight_decay);
  exp_avg.mul_(o.beta1).add_(g32, 1.0 - o.beta1);
  exp_avg_sq.mul_(o.beta2).addcmul_(g32, g32, 1.0 - o.beta2);
  at::Tensor denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(o.eps);
  w.addcdiv_(exp_avg, denom, -step_size);
}

namespace {

bool is_dense_cpu_float(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous();
}

// The update of adamw_update_with_ops in one pass (adamw_fused.h): each element's weight, gradient
// and two moments are read once and written once (28 bytes), where the nine tensor ops read and
// wrote 92 bytes and allocated two temporaries per tensor. The pass is elementwise and
// position-independent, so a slice's update is the whole one's bits (ZeRO-1 relies on it).
void adamw_update_fused(float* w, const float* g, float* m, float* v, int64_t n, double lr, int64_t step,
                        const AdamWOptions& o) {
  AdamWFactors f;
  f.decay = o.weight_decay != 0.0 ? float(1.0 - lr * o.weight_decay) : 1.0f;
  f.beta1 = float(o.beta1);
  f.one_minus_beta1 = float(1.0 - o.beta1);
  f.beta2 = float(o.beta2);
  f.one_minus_beta2 = float(1.0 - o.beta2);
  f.bias_correction2_sqrt = float(std::sqrt(1.0 - std::pow(o.beta2, double(step))));
  f.neg_step_size = float(-lr / (1.0 - std::pow(o.beta1, double(step))));
  f.eps = float(o.eps);
  parallel::host_parallel_for(0, n, int64_t(1) << 16, [&](int64_t begin, int64_t end) {
    adamw_fused(w + begin, g + begin, m + begin, v + begin, end - begin, f);
  });
}

}  // namespace

void adamw_update(at::Tensor& w, const at::Tensor& g, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, double lr,
                  int64_t step, const AdamWOptions& o) {
  if (!(is_dense_cpu_float(w) && is_dense_cpu_float(exp_avg) && is_dense_cpu_float(exp_avg_sq) &&
        g.device().is_cpu())) {
    adamw_update_with_ops(w, g, exp_avg, exp_avg_sq, lr, step, o);
    return;
  }
  const at::Tensor g32 = g.to(at::kFloat).contiguous();  // a no-op for a dense fp32 gradient
  HPCRL_CHECK(g32.numel() == w.numel() && exp_avg.numel() == w.numel() && exp_avg_sq.numel() == w.numel(),
              "adamw_update: weight, gradient and moments differ in size");
  adamw_update_fused(w.data_ptr<float>(), g32.data_ptr<float>(), exp_avg.data_ptr<float>(),
                     exp_avg_sq.data_ptr<float>(), w.numel(), lr, step, o);
  // Written through raw pointers: count it as the in-place op it is, so a graph that saved the
  // old weights refuses to run backward instead of reading the new ones.
  for (at::Tensor* t : {&w, &exp_avg, &exp_avg_sq}) t->unsafeGetTensorImpl()->bump_version();
}

AdamW::~AdamW() = default;

void AdamW::begin_micro_batch(bool last) {
  dense_sync_->prepare(last);
  expert_sync_->prepare(last);
}

void AdamW::reduce_gradients() {
  dense_sync_->finish();
  expert_sync_->finish();
  if (expert_divisor_ == 1.0) return;
  torch::NoGradGuard no_grad;
  for (auto& p : expert_params_)
    if (p.tensor.grad().defined()) p.tensor.mutable_grad().div_(expert_divisor_);
}

at::Tensor AdamW::reduced_gradient(const std::string& name) const {
  for (const auto& p : params_)
    if (p.name == name) return p.tensor.grad();
  HPCRL_CHECK(false, "AdamW: no parameter " << name);
  return {};
}

std::vector<at::Tensor> AdamW::reduced_gradients() const {
  std::vector<at::Tensor> grads;
  for (const auto& p : params_)
    if (p.tensor.grad().defined()) grads.push_back(p.tensor.grad());
  return grads;
}

double AdamW::clip_grad_norm(double max_norm, const parallel::ParallelContext& ctx) {
  return optim::clip_grad_norm(params_, max_norm, ctx);
}

std::string AdamW::first_nonfinite_gradient() const {
  torch::NoGradGuard no_grad;
  for (const auto& p : params_) {
    const at::Tensor& g = p.tensor.grad();
    if (g.defined() && !at::isfinite(g).all().item<bool>()) return "the gradient of " + p.name;
  }
  return "";
}

void AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  AdamWTensors t;
  std::vector<size_t> with_master;  // bf16/f16 parameters: updated on their fp32 master, copied back
  for (size_t i = 0; i < params_.size(); ++i) {
    at::Tensor grad = params_[i].tensor.grad();
    if (!grad.defined()) continue;
    Slot& s = slots_[i];
    t.w.push_back(s.master.defined() ? s.master : params_[i].tensor);
    t.g.push_back(grad);
    t.m.push_back(s.exp_avg);
    t.v.push_back(s.exp_avg_sq);
    if (s.master.defined()) with_master.push_back(i);
  }
  adamw_update_all(kernel_, t, lr, step_, options_);
  for (size_t i : with_master) params_[i].tensor.copy_(slots_[i].master);
}

void AdamW::zero_grad() {
  std::vector<at::Tensor> grads;
  for (auto& p : params_)
    if (p.tensor.grad().defined()) grads.push_back(p.tensor.mutable_grad());
  if (!grads.empty()) at::_foreach_zero_(grads);
}

std::map<std::string, at::Tensor> AdamW::state() const {
  std::map<std::string, at::Tensor> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& n = params_[i].name;
    out[n + ".exp_avg"] = slots_[i].exp_avg;
    out[n + ".exp_avg_sq"] = slots_[i].exp_avg_sq;
    if (slots_[i].master.defined()) out[n + ".master"] = slots_[i].master;
  }
  out["step"] = at::full({}, step_, at::kLong);
  if (!replica_.empty()) out["replica"] = at::tensor(replica_, at::kLong);
  return out;
}

int64_t AdamW::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : slots_)
    bytes += s.exp_avg.nbytes() + s.exp_avg_sq.nbytes() + (s.master.defined() ? s.master.nbytes() : 0);
  return bytes;
}

void AdamW::load_state(const std::map<std::string, at::Tensor>& state) {
  auto take = [&](const std::string& key, at::Tensor& dst) {
    auto it = state.find(key);
    HPCRL_CHECK_INPUT(it != state.end(), "optimizer state has no '" << key
                      << "': the checkpoint was written for a different model or layout; "
                         "resume with the same model and parallel layout");
    HPCRL_CHECK_INPUT(it->second.sizes() == dst.sizes(), "optimizer state '" << key << "' has shape "
                      << it->second.sizes() << " but this run expects " << dst.sizes()
                      << "; resume with the same parallel layout");
    torch::NoGradGuard no_grad;
    dst.copy_(it->second);
  };
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto& n = params_[i].name;
    take(n + ".exp_avg", slots_[i].exp_avg);
    take(n + ".exp_avg_sq", slots_[i].exp_avg_sq);
    if (slots_[i].master.defined()) take(n + ".master", slots_[i].master);
  }
  auto it = state.find("step");
  HPCRL_CHECK_INPUT(it != state.end(), "optimizer state has no 'step'");
  step_ = it->second.item<int64_t>();
}

void AdamW::load_resharded(const std::vector<SavedState>& saved) {
  for (const SavedState& s : saved) {
    if (!is_replica(s, "replica", replica_, "the optimizer state")) continue;
    std::map<std::string, at::Tensor> state;  // every replica holds the same state: the first one found serves
    for (const auto& name : s.names()) state[name] = s.load(name);
    return load_state(state);
  }
  HPCRL_CHECK_INPUT(false, "the checkpoint has no optimizer state for this rank's model shard; resume with the same "
                           "model and tp/ep/pp layout");
}

}  // namespace hpcrl::optim
