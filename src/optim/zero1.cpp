// ZeRO-1 sharded AdamW (see zero1.h). Per shard group, per step:
//   flat [W·S]  <- local gradients, end to end, zero padding
//   grad [S]    <- reduce_scatter(flat, avg) / grad_divisor
//   w [S]       <- fp32 master shard (bf16/f16) or a copy of the owned parameters (fp32)
//   adamw_update(w, grad, exp_avg [S], exp_avg_sq [S])
//   flat [W·S]  <- all_gather(w as param dtype) -> copied into every parameter
// Padding elements have zero weight and gradient and stay zero (the update of
// 0 with m = v = 0 is 0), so they never leak into the parameters.
#include "hpcrl/optim/zero1.h"

#include <torch/utils.h>

#include <algorithm>

#include "hpcrl/optim/grad_clip.h"
#include "hpcrl/util/check.h"

namespace hpcrl::optim {

Zero1AdamW::Zero1AdamW(std::vector<ShardGroup> groups, AdamWOptions options) : options_(options) {
  groups_.reserve(groups.size());
  for (auto& spec : groups) {
    groups_.emplace_back();
    groups_.back().spec = std::move(spec);
    setup(groups_.back());
  }
}

void Zero1AdamW::setup(Group& g) {
  const ParamSet& ps = g.spec.params;
  g.size = g.spec.group ? g.spec.group->size() : 1;
  g.rank = g.spec.group ? g.spec.group->rank() : 0;
  if (ps.empty()) return;
  const at::Tensor& first = ps.front().tensor;
  g.dtype = first.scalar_type();
  for (const auto& p : ps) {
    HPCRL_CHECK(p.tensor.scalar_type() == g.dtype && p.tensor.device() == first.device(),
                "ZeRO-1 group '" << g.spec.name << "': parameter " << p.name << " is " << p.tensor.scalar_type()
                << " on " << p.tensor.device() << " but " << ps.front().name << " is " << g.dtype << " on "
                << first.device() << "; one flat buffer needs one dtype and device");
    HPCRL_CHECK(p.tensor.is_contiguous(), "ZeRO-1 group '" << g.spec.name << "': parameter " << p.name
                << " is not contiguous; the all-gather writes parameters through a flat view");
    g.offsets.push_back(g.numel);
    g.numel += p.tensor.numel();
  }
  g.shard = (g.numel + g.size - 1) / g.size;
  const int64_t lo = g.rank * g.shard, hi = lo + g.shard;
  for (size_t i = 0; i < ps.size(); ++i) {
    const int64_t a = std::max(lo, g.offsets[i]), b = std::min(hi, g.offsets[i] + ps[i].tensor.numel());
    if (a < b) g.segments.push_back({i, a - g.offsets[i], a - lo, b - a});
  }
  auto f32 = first.options().dtype(at::kFloat).requires_grad(false);
  g.exp_avg = at::zeros({g.shard}, f32);
  g.exp_avg_sq = at::zeros({g.shard}, f32);
  if (g.dtype != at::kFloat && g.dtype != at::kDouble) {
    torch::NoGradGuard no_grad;
    g.master = at::zeros({g.shard}, f32);
    for (const auto& s : g.segments)
      g.master.slice(0, s.shard_offset, s.shard_offset + s.length)
          .copy_(ps[s.param].tensor.detach().view(-1).slice(0, s.param_offset, s.param_offset + s.length));
  }
}

Zero1AdamW::Extent Zero1AdamW::extent(size_t group) const {
  const Group& g = groups_.at(group);
  return {g.numel, g.shard, g.shard * g.size};
}

void Zero1AdamW::reduce_gradients() {
  torch::NoGradGuard no_grad;
  for (auto& g : groups_) {
    if (g.numel == 0) continue;
    const ParamSet& ps = g.spec.params;
    g.flat = at::empty({g.shard * g.size}, ps.front().tensor.options().requires_grad(false));  // [W·S]
    for (size_t i = 0; i < ps.size(); ++i) {
      at::Tensor dst = g.flat.slice(0, g.offsets[i], g.offsets[i] + ps[i].tensor.numel());
      at::Tensor grad = ps[i].tensor.grad();
      if (grad.defined()) dst.copy_(grad.reshape({-1}));
      else dst.zero_();  // as the dp all-reduce does: no gradient on this rank counts as zero
    }
    g.flat.slice(0, g.numel, g.flat.numel()).zero_();
    if (g.size > 1) {
      g.grad = at::empty({g.shard}, g.flat.options());  // [S]
      g.spec.group->reduce_scatter_into(g.grad, g.flat, dist::ReduceOp::kAvg);
    } else {
      g.grad = g.flat;  // S = N: nothing to exchange
    }
    if (g.spec.grad_divisor != 1.0) g.grad.div_(g.spec.grad_divisor);
  }
}

double Zero1AdamW::clip_grad_norm(double max_norm, const parallel::ParallelContext& ctx) {
  torch::NoGradGuard no_grad;
  // [replicated, tp shards, ep shards] as in global_grad_norm, from the owned elements.
  at::Tensor parts = at::zeros({3}, at::kDouble);
  for (auto& g : groups_) {
    if (g.numel == 0) continue;
    HPCRL_CHECK(g.grad.defined(), "Zero1AdamW::clip_grad_norm before reduce_gradients()");
    at::Tensor local = at::zeros({3}, at::kDouble);
    for (const auto& s : g.segments) {
      const Param& p = g.spec.params[s.param];
      double sq = g.grad.slice(0, s.shard_offset, s.shard_offset + s.length).to(at::kDouble).pow(2).sum()
                      .item<double>();
      local[static_cast<int>(p.sharding)] += sq / double(p.replicas);
    }
    if (g.size > 1) g.spec.group->all_reduce(local);  // shards are disjoint: each element once
    parts += local;
  }
  const double norm = grad_norm_from_parts(parts, ctx);
  const double scale = clip_coefficient(norm, max_norm);
  if (scale != 1.0)
    for (auto& g : groups_)
      if (g.numel > 0) g.grad.mul_(scale);
  return norm;
}

at::Tensor Zero1AdamW::weight_shard(const Group& g) const {
  if (g.master.defined()) return g.master;
  at::Tensor w = at::zeros({g.shard}, g.spec.params.front().tensor.options().requires_grad(false));  // [S]
  for (const auto& s : g.segments)
    w.slice(0, s.shard_offset, s.shard_offset + s.length)
        .copy_(g.spec.params[s.param].tensor.detach().view(-1).slice(0, s.param_offset, s.param_offset + s.length));
  return w;
}

void Zero1AdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  for (const auto& g : groups_)
    HPCRL_CHECK(g.numel == 0 || g.grad.defined(), "Zero1AdamW::step without reduce_gradients() for this step");
  ++step_;
  for (auto& g : groups_) {
    if (g.numel == 0) continue;
    at::Tensor w = weight_shard(g);
    adamw_update(w, g.grad, g.exp_avg, g.exp_avg_sq, lr, step_, options_);
    at::Tensor out = w.scalar_type() == g.dtype ? w : w.to(g.dtype);  // [S]
    at::Tensor full = out;                                              // [N] when W = 1
    if (g.size > 1) {
      g.spec.group->all_gather_into(g.flat, out);  // the gradient buffer is free again: reuse it
      full = g.flat;                               // [W·S]
    }
    const ParamSet& ps = g.spec.params;
    for (size_t i = 0; i < ps.size(); ++i)
      ps[i].tensor.view({-1}).copy_(full.slice(0, g.offsets[i], g.offsets[i] + ps[i].tensor.numel()));
    g.flat = at::Tensor();
    g.grad = at::Tensor();
  }
}

void Zero1AdamW::zero_grad() {
  for (auto& g : groups_)
    for (auto& p : g.spec.params) {
      at::Tensor grad = p.tensor.mutable_grad();
      if (grad.defined()) grad.zero_();
    }
}

std::map<std::string, at::Tensor> Zero1AdamW::state() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& g : groups_) {
    const std::string& n = g.spec.name;
    out[n + ".exp_avg"] = g.exp_avg.defined() ? g.exp_avg : at::zeros({0}, at::kFloat);
    out[n + ".exp_avg_sq"] = g.exp_avg_sq.defined() ? g.exp_avg_sq : at::zeros({0}, at::kFloat);
    if (g.master.defined()) out[n + ".master"] = g.master;
    out[n + ".layout"] = at::tensor(std::vector<int64_t>{g.size, g.rank, g.numel, g.shard}, at::kLong);
  }
  out["step"] = at::full({}, step_, at::kLong);
  return out;
}

void Zero1AdamW::load_state(const std::map<std::string, at::Tensor>& state) {
  auto find = [&](const std::string& key, const std::string& fix) -> const at::Tensor& {
    auto it = state.find(key);
    HPCRL_CHECK_INPUT(it != state.end(), "optimizer state has no '" << key << "': " << fix);
    return it->second;
  };
  for (auto& g : groups_) {
    const std::string& n = g.spec.name;
    at::Tensor layout = find(n + ".layout", "the checkpoint was written without ZeRO-1 (optim.zero1: false) or for "
                                            "another model; resume with the same optim.zero1 setting and model")
                            .to(at::kLong).contiguous();
    HPCRL_CHECK_INPUT(layout.numel() == 4, "optimizer state '" << n << ".layout' has " << layout.numel()
                      << " entries, expected 4 [group size, group rank, elements, shard]; the checkpoint is damaged");
    const int64_t* l = layout.data_ptr<int64_t>();
    HPCRL_CHECK_INPUT(l[0] == g.size, "optimizer state '" << n << "' was sharded (ZeRO-1) over " << l[0]
                      << " data-parallel ranks but this run shards it over " << g.size
                      << "; resume with the same data-parallel size (dp·sp for dense parameters, edp for experts), "
                         "or start without --resume from the HF model saved in the checkpoint");
    HPCRL_CHECK_INPUT(l[2] == g.numel, "optimizer state '" << n << "' covers " << l[2] << " parameter elements but "
                      "this model has " << g.numel << "; resume with the same model and tp/ep/pp layout");
    HPCRL_CHECK_INPUT(l[1] == g.rank, "optimizer state '" << n << "' is rank " << l[1] << "'s shard but this is rank "
                      << g.rank << " of the group; resume with the same world size and rank order");
    auto take = [&](const std::string& key, at::Tensor& dst) {
      const at::Tensor& src = find(key, "the checkpoint is damaged or from another model; resume with the same model");
      HPCRL_CHECK_INPUT(src.sizes() == dst.sizes(), "optimizer state '" << key << "' has shape " << src.sizes()
                        << " but this run expects " << dst.sizes() << "; resume with the same layout");
      torch::NoGradGuard no_grad;
      dst.copy_(src);
    };
    if (g.numel == 0) continue;
    take(n + ".exp_avg", g.exp_avg);
    take(n + ".exp_avg_sq", g.exp_avg_sq);
    if (g.master.defined()) take(n + ".master", g.master);
  }
  step_ = find("step", "the checkpoint is damaged").item<int64_t>();
}

int64_t Zero1AdamW::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& g : groups_)
    for (const at::Tensor* t : {&g.exp_avg, &g.exp_avg_sq, &g.master})
      if (t->defined()) bytes += t->nbytes();
  return bytes;
}

}  // namespace hpcrl::optim
