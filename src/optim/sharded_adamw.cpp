// ZeRO-1/ZeRO-2 sharded AdamW (see sharded_adamw.h). Per shard group, per step:
//   grad [S]  <- the reducer's shard: every bucket averaged over the group / grad_divisor
//   per chunk of at most kStepChunk owned elements of each bucket (update_and_gather):
//     w [n]   <- its slice of the fp32 master shard (bf16/f16) or a copy of the owned parameters (fp32)
//     adamw_update(w, grad, exp_avg, exp_avg_sq) on the chunk's slices
//     [W·n]   <- all_gather(w as param dtype) -> copied into its parameters
// (ZeRO-3 updates its resident shard whole and releases the gathered layers.)
// Padding elements have zero weight and gradient and stay zero (the update of
// 0 with m = v = 0 is 0), so they never leak into the parameters.
#include "hpcrl/optim/sharded_adamw.h"

#include <torch/utils.h>

#include <algorithm>

#include "hpcrl/optim/grad_clip.h"
#include "hpcrl/optim/reshard.h"
#include "hpcrl/util/check.h"

namespace hpcrl::optim {


ShardedAdamW::ShardedAdamW(std::vector<ShardGroup> groups, AdamWOptions options, int stage, int64_t bucket_bytes)
    : options_(options), stage_(stage) {
  HPCRL_CHECK(stage >= 1 && stage <= 3, "ShardedAdamW: ZeRO stage " << stage << " (1, 2 or 3)");
  groups_.reserve(groups.size());
  for (auto& spec : groups) {
    groups_.emplace_back();
    groups_.back().spec = std::move(spec);
    setup(groups_.back(), bucket_bytes);
  }
}

void ShardedAdamW::setup(Group& g, int64_t bucket_bytes) {
  const ParamSet& ps = g.spec.params;
  const int size = g.spec.group ? g.spec.group->size() : 1, rank = g.spec.group ? g.spec.group->rank() : 0;
  std::vector<int64_t> numels;
  for (const auto& p : ps) {
    const at::Tensor& first = ps.front().tensor;
    HPCRL_CHECK(p.tensor.scalar_type() == first.scalar_type() && p.tensor.device() == first.device(),
                "ZeRO group '" << g.spec.name << "': parameter " << p.name << " is " << p.tensor.scalar_type()
                << " on " << p.tensor.device() << " but " << ps.front().name << " is " << first.scalar_type()
                << " on " << first.device() << "; one flat buffer needs one dtype and device");
    HPCRL_CHECK(p.tensor.is_contiguous(), "ZeRO group '" << g.spec.name << "': parameter " << p.name
                << " is not contiguous; the all-gather writes parameters through a flat view");
    numels.push_back(p.tensor.numel());
  }
  HPCRL_CHECK(stage_ >= 2 || g.spec.alone.empty(), "ZeRO group '" << g.spec.name
              << "': ZeRO-1 keeps every parameter in one bucket, none alone");
  const int64_t element_bytes = ps.empty() ? 4 : int64_t(ps.front().tensor.element_size());
  if (stage_ == 3)
    HPCRL_CHECK(g.spec.units.size() == ps.size(), "ZeRO group '" << g.spec.name << "': " << g.spec.units.size()
                << " forward units for " << ps.size() << " parameters");
  ShardLayout layout = stage_ == 1   ? ShardLayout::whole(numels, size, rank)
                       : stage_ == 3 ? ShardLayout::by_units(numels, g.spec.units, size, rank, g.spec.alone)
                                     : ShardLayout::bucketed(numels, std::max<int64_t>(1, bucket_bytes / element_bytes),
                                                             size, rank, g.spec.alone);
  g.reducer = std::make_unique<GradReduceScatter>(ps, std::move(layout), g.spec.group, /*streaming=*/stage_ >= 2);
  if (ps.empty()) return;
  const ShardLayout& l = g.reducer->layout();
  g.dtype = ps.front().tensor.scalar_type();
  auto f32 = ps.front().tensor.options().dtype(at::kFloat).requires_grad(false);
  g.exp_avg = at::zeros({l.shard}, f32);
  g.exp_avg_sq = at::zeros({l.shard}, f32);
  if (g.dtype != at::kFloat && g.dtype != at::kDouble) g.master = owned_elements(ps, l, f32);
  if (stage_ == 3) g.sharded = std::make_unique<ShardedParameters>(ps, l, g.spec.group);
}

void ShardedAdamW::begin_micro_batch(bool /*last*/) {
  if (stage_ >= 2)
    for (auto& g : groups_) g.reducer->begin_micro_batch();
}

void ShardedAdamW::reduce_gradients() {
  torch::NoGradGuard no_grad;
  for (auto& g : groups_) {
    g.grad = g.reducer->finish();
    if (g.grad.defined() && g.spec.grad_divisor != 1.0) g.grad.div_(g.spec.grad_divisor);
  }
}

double ShardedAdamW::clip_grad_norm(double max_norm, const parallel::ParallelContext& ctx) {
  torch::NoGradGuard no_grad;
  // [replicated, tp shards, ep shards] as in global_grad_norm, from the owned elements.
  at::Tensor parts = at::zeros({3}, at::kDouble);
  for (auto& g : groups_) {
    if (g.spec.params.empty()) continue;
    HPCRL_CHECK(g.grad.defined(), "ShardedAdamW::clip_grad_norm before reduce_gradients()");
    at::Tensor local = at::zeros({3}, at::kDouble);
    for (const auto& s : g.reducer->layout().segments) {
      const Param& p = g.spec.params[s.param];
      double sq = g.grad.slice(0, s.shard_offset, s.shard_offset + s.length).to(at::kDouble).pow(2).sum()
                      .item<double>();
      local[static_cast<int>(p.sharding)] += sq / double(p.replicas);
    }
    dist::all_reduce(g.spec.group, local);  // disjoint shards
    parts += local;
  }
  const double norm = grad_norm_from_parts(parts, ctx);
  const double scale = clip_coefficient(norm, max_norm);
  if (scale != 1.0)
    for (auto& g : groups_)
      if (g.grad.defined()) g.grad.mul_(scale);
  return norm;
}

namespace {
// `gathered` holds W runs of n elements, run q being elements [q·Sb + c0, q·Sb + c0 + n)
// of bucket b's flat buffer (rank q's slice, from c0 on): copied into the parameters they
// belong to; the padding past the bucket's Nb elements is dropped.
void copy_into_parameters(const ParamSet& ps, const ShardLayout::Bucket& b, int W, int64_t c0, int64_t n,
                          const at::Tensor& gathered) {
  for (int q = 0; q < W; ++q) {
    const int64_t f0 = q * b.shard + c0;
    for (size_t j = 0; j < b.params.size(); ++j) {
      const at::Tensor& p = ps[b.params[j]].tensor;
      const int64_t lo = std::max(f0, b.offsets[j]), hi = std::min(f0 + n, b.offsets[j] + p.numel());
      if (lo >= hi) continue;
      p.view({-1}).slice(0, lo - b.offsets[j], hi - b.offsets[j])
          .copy_(gathered.slice(0, q * n + lo - f0, q * n + hi - f0));
    }
  }
}
}  // namespace

void ShardedAdamW::update_and_gather(Group& g, double lr) {
  const ShardLayout& l = g.reducer->layout();
  const ParamSet& ps = g.spec.params;
  const int W = l.size;
  int64_t widest = 0;  // the longest chunk of any bucket
  for (const auto& b : l.buckets) widest = std::max(widest, std::min(kStepChunk, b.shard));
  const auto options = ps.front().tensor.options().requires_grad(false);
  at::Tensor owned = g.master.defined() ? at::Tensor() : at::empty({widest}, options);  // fp32: the chunk's weights
  at::Tensor gathered = W > 1 ? at::empty({widest * W}, options) : at::Tensor();
  for (const ShardLayout::Bucket& b : l.buckets) {
    for (int64_t c0 = 0; c0 < b.shard; c0 += kStepChunk) {
      const int64_t n = std::min(kStepChunk, b.shard - c0), s0 = b.shard_offset + c0;
      at::Tensor w = g.master.defined() ? g.master.slice(0, s0, s0 + n) : owned.narrow(0, 0, n);
      if (!g.master.defined()) copy_owned_elements(ps, l, s0, w);
      at::Tensor m = g.exp_avg.slice(0, s0, s0 + n), v = g.exp_avg_sq.slice(0, s0, s0 + n);
      adamw_update(w, g.grad.slice(0, s0, s0 + n), m, v, lr, step_, options_);
      const at::Tensor mine = w.scalar_type() == g.dtype ? w : w.to(g.dtype);  // [n]
      at::Tensor all = mine;                                                     // [W·n]
      if (W > 1) {
        all = gathered.narrow(0, 0, n * W);
        g.spec.group->all_gather_into(all, mine);
      }
      copy_into_parameters(ps, b, W, c0, n, all);
    }
  }
}

void ShardedAdamW::step(double lr) {
  torch::NoGradGuard no_grad;
  for (const auto& g : groups_)
    HPCRL_CHECK(g.spec.params.empty() || g.grad.defined(),
                "ShardedAdamW::step without reduce_gradients() for this step");
  ++step_;
  for (auto& g : groups_) {
    if (g.spec.params.empty()) continue;
    if (g.sharded) {  // ZeRO-3: the shard (or its fp32 master) is the update's own memory
      at::Tensor w = g.master.defined() ? g.master : g.sharded->shard();
      adamw_update(w, g.grad, g.exp_avg, g.exp_avg_sq, lr, step_, options_);
      if (g.master.defined()) g.sharded->shard().copy_(w);
      // Gathered values are stale now; the next forward gathers the update.
      for (size_t b = 0; b < g.sharded->layout().buckets.size(); ++b) g.sharded->release(b);
    } else {
      update_and_gather(g, lr);
    }
    g.grad = at::Tensor();
  }
}

void ShardedAdamW::zero_grad() {
  for (auto& g : groups_) {
    g.grad = at::Tensor();
    for (auto& p : g.spec.params) p.tensor.mutable_grad().reset();
  }
}

void ShardedAdamW::drop_state() {
  for (auto& g : groups_) g.exp_avg = g.exp_avg_sq = g.master = g.grad = at::Tensor();
}

std::string ShardedAdamW::first_nonfinite_gradient() const {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < groups_.size(); ++i) {
    const Group& g = groups_[i];
    if (!g.grad.defined()) continue;
    for (const auto& s : layout(i).segments)
      if (!at::isfinite(g.grad.slice(0, s.shard_offset, s.shard_offset + s.length)).all().item<bool>())
        return "the gradient of " + g.spec.params[s.param].name + " (this rank's shard)";
  }
  return "";
}

std::vector<at::Tensor> ShardedAdamW::reduced_gradients() const {
  std::vector<at::Tensor> shards;
  for (const auto& g : groups_)
    if (g.grad.defined() && g.grad.numel() > 0) shards.push_back(g.grad);
  return shards;
}

at::Tensor ShardedAdamW::reduced_gradient(const std::string& name) const {
  for (const Group& g : groups_)
    for (size_t k = 0; k < g.spec.params.size(); ++k) {
      if (g.spec.params[k].name != name) continue;
      HPCRL_CHECK(g.grad.defined(), "ZeRO group '" << g.spec.name << "': no reduced gradient before reduce_gradients()");
      for (const auto& bucket : g.reducer->layout().buckets)
        if (bucket.params.size() == 1 && bucket.params.front() == k)
          return g.grad.slice(0, bucket.shard_offset, bucket.shard_offset + bucket.shard);
      HPCRL_CHECK(false, "ZeRO group '" << g.spec.name << "': parameter " << name << " has no bucket of its own");
    }
  HPCRL_CHECK(false, "ShardedAdamW: no parameter " << name);
  return {};
}

int64_t ShardedAdamW::peak_gradient_bytes() const {
  int64_t bytes = 0;
  for (const auto& g : groups_) bytes += g.reducer->peak_bytes();
  return bytes;
}

std::map<std::string, at::Tensor> ShardedAdamW::state() const {
  std::map<std::string, at::Tensor> out;
  for (const auto& g : groups_) {
    const std::string& n = g.spec.name;
    const ShardLayout& l = g.reducer->layout();
    out[n + ".exp_avg"] = g.exp_avg.defined() ? g.exp_avg : at::zeros({0}, at::kFloat);
    out[n + ".exp_avg_sq"] = g.exp_avg_sq.defined() ? g.exp_avg_sq : at::zeros({0}, at::kFloat);
    if (g.master.defined()) out[n + ".master"] = g.master;
    out[n + ".layout"] = at::tensor(std::vector<int64_t>{l.size, l.rank, l.numel, l.shard}, at::kLong);
    if (!g.spec.replica.empty()) out[n + ".replica"] = at::tensor(g.spec.replica, at::kLong);
    if (stage_ >= 2) {
      std::vector<int64_t> sizes;
      for (const auto& b : l.buckets) sizes.push_back(b.numel);
      out[n + ".buckets"] = at::tensor(sizes, at::kLong);
    }
  }
  out["step"] = at::full({}, step_, at::kLong);
  return out;
}

namespace {
const at::Tensor& find_state(const std::map<std::string, at::Tensor>& state, const std::string& key,
                             const std::string& fix) {
  auto it = state.find(key);
  HPCRL_CHECK_INPUT(it != state.end(), "optimizer state has no '" << key << "': " << fix);
  return it->second;
}
}  // namespace

void ShardedAdamW::load_group(Group& g, const std::map<std::string, at::Tensor>& state) {
  const std::string& n = g.spec.name;
  const ShardLayout& l = g.reducer->layout();
  at::Tensor layout = find_state(state, n + ".layout",
                                 "the checkpoint was written with another optim.zero setting (this run has zero: " +
                                     std::to_string(stage_) + ") or for another model; resume with the same "
                                     "optim.zero and model")
                          .to(at::kLong).contiguous();
  HPCRL_CHECK_INPUT(layout.numel() == 4, "optimizer state '" << n << ".layout' has " << layout.numel()
                    << " entries, expected 4 [group size, group rank, elements, shard]; the checkpoint is damaged");
  const int64_t* saved = layout.data_ptr<int64_t>();
  HPCRL_CHECK_INPUT(saved[0] == l.size, "optimizer state '" << n << "' was sharded (ZeRO-" << stage_ << ") over "
                    << saved[0] << " data-parallel ranks but this run shards it over " << l.size
                    << "; resume with the same data-parallel size (dp·sp for dense parameters, edp for experts), "
                       "or start without --resume from the HF model saved in the checkpoint");
  HPCRL_CHECK_INPUT(saved[2] == l.numel, "optimizer state '" << n << "' covers " << saved[2] << " parameter elements "
                    "but this model has " << l.numel << "; resume with the same model and tp/ep/pp layout");
  HPCRL_CHECK_INPUT(saved[1] == l.rank, "optimizer state '" << n << "' is rank " << saved[1] << "'s shard but this "
                    "is rank " << l.rank << " of the group; resume with the same world size and rank order");
  if (stage_ >= 2) {
    at::Tensor buckets = find_state(state, n + ".buckets", "the checkpoint is damaged").to(at::kLong).contiguous();
    bool same = buckets.numel() == int64_t(l.buckets.size());
    for (size_t b = 0; same && b < l.buckets.size(); ++b) same = buckets.data_ptr<int64_t>()[b] == l.buckets[b].numel;
    HPCRL_CHECK_INPUT(same && saved[3] == l.shard, "optimizer state '" << n << "' was saved with "
                      << buckets.numel() << " gradient buckets, this run cuts " << l.buckets.size()
                      << " from the same parameters; the shards hold other elements, so resume with the "
                         "optim.bucket_mb and model that wrote the checkpoint");
  }
  auto take = [&](const std::string& key, at::Tensor& dst) {
    const at::Tensor& src = find_state(state, key, "the checkpoint is damaged or from another model; resume with "
                                                   "the same model");
    HPCRL_CHECK_INPUT(src.sizes() == dst.sizes(), "optimizer state '" << key << "' has shape " << src.sizes()
                      << " but this run expects " << dst.sizes() << "; resume with the same layout");
    torch::NoGradGuard no_grad;
    dst.copy_(src);
  };
  if (g.spec.params.empty()) return;
  take(n + ".exp_avg", g.exp_avg);
  take(n + ".exp_avg_sq", g.exp_avg_sq);
  if (g.master.defined()) take(n + ".master", g.master);
}

void ShardedAdamW::load_state(const std::map<std::string, at::Tensor>& state) {
  for (auto& g : groups_) load_group(g, state);
  step_ = find_state(state, "step", "the checkpoint is damaged").item<int64_t>();
}

void ShardedAdamW::reshard_group(Group& g, const std::vector<SavedState>& saved) {
  const std::string& n = g.spec.name;
  const ShardLayout& l = g.reducer->layout();
  // The saved ranks of this group's model shard, by their rank in the saved group.
  std::vector<const SavedState*> by_rank;
  for (const SavedState& s : saved) {
    if (!s.has(n + ".layout")) continue;
    if (!is_replica(s, n + ".replica", g.spec.replica, "optimizer state '" + n + "'")) continue;
    const std::vector<int64_t> layout = s.int64s(n + ".layout");
    HPCRL_CHECK_INPUT(layout.size() == 4 && layout[0] >= 1 && layout[1] >= 0 && layout[1] < layout[0],
                      s.source << ": optimizer state '" << n << ".layout' is damaged");
    HPCRL_CHECK_INPUT(layout[2] == l.numel, s.source << ": optimizer state '" << n << "' covers " << layout[2]
                      << " parameter elements but this model has " << l.numel
                      << "; resume with the same model and tp/ep/pp layout");
    if (by_rank.empty()) by_rank.assign(size_t(layout[0]), nullptr);
    HPCRL_CHECK_INPUT(size_t(layout[0]) == by_rank.size() && !by_rank[size_t(layout[1])],
                      s.source << ": optimizer state '" << n << "' is rank " << layout[1] << " of a group of "
                      << layout[0] << ", which another saved file also is; the checkpoint mixes two runs");
    by_rank[size_t(layout[1])] = &s;
  }
  for (size_t q = 0; q < by_rank.size(); ++q)
    HPCRL_CHECK_INPUT(by_rank[q], "the checkpoint has no optimizer shard of '" << n << "' for rank " << q << " of its "
                      << by_rank.size() << "-rank group; copy every optimizer-rank-*.safetensors of the checkpoint");
  HPCRL_CHECK_INPUT(!by_rank.empty() || g.spec.params.empty(), "the checkpoint has no optimizer state '" << n
                    << "' for this rank's model shard; resume with the same model and tp/ep/pp layout");
  if (g.spec.params.empty()) return;
  std::vector<int64_t> buckets;
  for (const auto& b : l.buckets) buckets.push_back(b.numel);
  if (stage_ >= 2)
    HPCRL_CHECK_INPUT(by_rank.front()->int64s(n + ".buckets") == buckets,
                      by_rank.front()->source << ": optimizer state '" << n << "' was cut into other gradient "
                      "buckets; resume with the optim.bucket_mb and model that wrote the checkpoint");
  torch::NoGradGuard no_grad;
  for (auto [key, dst] : {std::pair{".exp_avg", &g.exp_avg}, {".exp_avg_sq", &g.exp_avg_sq}, {".master", &g.master}})
    if (dst->defined())
      dst->copy_(reshard(buckets, int(by_rank.size()), [&](int q) { return by_rank[size_t(q)]->load(n + key); },
                         l.size, l.rank, dst->options()));
}

void ShardedAdamW::load_resharded(const std::vector<SavedState>& saved) {
  HPCRL_CHECK_INPUT(!saved.empty(), "no saved optimizer state to reshard");
  for (auto& g : groups_) reshard_group(g, saved);
  step_ = saved.front().load("step").item<int64_t>();
}

int64_t ShardedAdamW::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& g : groups_)
    for (const at::Tensor* t : {&g.exp_avg, &g.exp_avg_sq, &g.master})
      if (t->defined()) bytes += t->nbytes();
  return bytes;
}

}  // namespace hpcrl::optim
