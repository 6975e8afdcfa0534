// ZeRO-1 against the plain path on the same ranks: N steps of a small net with
// per-rank batches, once with dp all-reduce (GradSync) + clip_grad_norm + AdamW,
// once with reduce-scatter + sharded clip + sharded AdamW + all-gather. Sizes are
// chosen so the flat buffer does not divide by 2 or 4 (padding) and shards cut
// through parameters. Also: state bytes per rank ≈ 1/dp, exact resume from
// state(), a clear error when resuming with another dp size or without ZeRO-1,
// and the expert group (edp, 1/ep) as the Trainer wires it.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include "hpcrl/dist/bootstrap.h"
#include "hpcrl/optim/grad_clip.h"
#include "hpcrl/optim/grad_sync.h"
#include "hpcrl/optim/zero1.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;

namespace {
const optim::AdamWOptions kOpts{1e-2, 0.9, 0.95, 1e-8, 0.1};

struct Net {
  at::Tensor w1, b1, w2;  // 7·13 + 13 + 13 = 117 elements: odd, so W·S pads at dp 2 and 4
  Net(int seed, at::ScalarType dtype) {
    torch::manual_seed(seed);
    w1 = torch::randn({7, 13}).to(dtype).requires_grad_(true);
    b1 = torch::randn({13}).to(dtype).requires_grad_(true);
    w2 = torch::randn({13, 1}).to(dtype).requires_grad_(true);
  }
  at::Tensor loss(const at::Tensor& x) {
    return (x.to(w1.scalar_type()).matmul(w1) + b1).tanh().matmul(w2).pow(2).mean().to(at::kFloat);
  }
  optim::ParamSet params() {
    return {{"w1", w1, optim::Sharding::kReplicated}, {"b1", b1, optim::Sharding::kReplicated},
            {"w2", w2, optim::Sharding::kReplicated}};
  }
  std::vector<at::Tensor> tensors() const { return {w1, b1, w2}; }
};

at::Tensor batch_of(int rank, int step) {
  torch::manual_seed(500 + 37 * step + rank);
  return torch::randn({5, 7});
}

double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  return ((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item<double>();
}

// Plain path: dp all-reduce during backward, clip, AdamW. Returns the pre-clip norms.
std::vector<double> train_plain(Net& net, optim::AdamW& opt, const dist::CommPtr& dp, int steps, double clip,
                                int first_step = 0) {
  auto ps = net.params();
  optim::GradSync sync(ps, dp, /*bucket_bytes=*/128);
  parallel::ParallelContext ctx;
  std::vector<double> norms;
  for (int s = first_step; s < first_step + steps; ++s) {
    sync.prepare(true);
    net.loss(batch_of(dp->rank(), s)).backward();
    sync.finish();
    norms.push_back(optim::clip_grad_norm(ps, clip, ctx));
    opt.step(kOpts.lr);
    opt.zero_grad();
  }
  return norms;
}

std::vector<double> train_zero1(Net& net, optim::Zero1AdamW& opt, int rank, int steps, double clip,
                                int first_step = 0) {
  parallel::ParallelContext ctx;
  std::vector<double> norms;
  for (int s = first_step; s < first_step + steps; ++s) {
    net.loss(batch_of(rank, s)).backward();
    opt.reduce_gradients();
    norms.push_back(opt.clip_grad_norm(clip, ctx));
    opt.step(kOpts.lr);
    opt.zero_grad();
  }
  return norms;
}

void expect_same_training(at::ScalarType dtype) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int steps = 6;
  const double clip = 0.5;  // below the early norms: the clip factor is exercised
  Net plain(3, dtype), sharded(3, dtype);
  optim::AdamW ref(plain.params(), kOpts);
  optim::Zero1AdamW zero({{"zero1.dense", sharded.params(), world}}, kOpts);
  auto a = train_plain(plain, ref, world, steps, clip);
  auto b = train_zero1(sharded, zero, world->rank(), steps, clip);
  EXPECT_GT(a.front(), clip) << "the test must clip";
  for (int s = 0; s < steps; ++s) EXPECT_NEAR(a[s], b[s], 1e-12 * a[s]) << "grad norm at step " << s;
  auto pa = plain.tensors(), pb = sharded.tensors();
  for (size_t i = 0; i < pa.size(); ++i) {
    if (dtype == at::kFloat) EXPECT_LE(rel_diff(pb[i], pa[i]), 1e-6) << "param " << i;
    else EXPECT_TRUE(torch::equal(pb[i], pa[i])) << "bf16 param " << i;
  }
  if (dtype != at::kFloat) {
    // fp32 masters: the shard equals the plain master's slice.
    auto st = ref.state();
    at::Tensor flat = torch::cat({st.at("w1.master").reshape(-1), st.at("b1.master").reshape(-1),
                                  st.at("w2.master").reshape(-1)});
    auto e = zero.extent(0);
    int64_t lo = world->rank() * e.shard, hi = std::min(lo + e.shard, e.numel);
    at::Tensor mine = zero.state().at("zero1.dense.master").slice(0, 0, hi - lo);
    EXPECT_LE(rel_diff(mine, flat.slice(0, lo, hi)), 1e-6);
  }
}
}  // namespace

TEST(Zero1, Fp32MatchesAllReduceAdamWWithDecayAndClipping) { expect_same_training(at::kFloat); }

TEST(Zero1, Bf16ParamsWithFp32MastersMatchPlainAdamW) { expect_same_training(at::kBFloat16); }

TEST(Zero1, StateBytesPerRankShrinkByDp) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int64_t W = world->size();
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    Net a(1, dtype), b(1, dtype);
    optim::AdamW plain(a.params(), kOpts);
    optim::Zero1AdamW zero({{"zero1.dense", b.params(), world}}, kOpts);
    const int64_t per_elem = dtype == at::kFloat ? 8 : 12;  // two fp32 moments (+ fp32 master)
    EXPECT_EQ(plain.state_bytes(), 117 * per_elem);
    EXPECT_EQ(zero.state_bytes(), (117 + W - 1) / W * per_elem);
    // ≈ 1/dp: at most one padding element per rank more than an exact split.
    EXPECT_LE(zero.state_bytes() * W, plain.state_bytes() + W * per_elem);
    EXPECT_GE(zero.state_bytes() * W, plain.state_bytes());
  }
}

TEST(Zero1, SaveLoadResumesBitIdentically) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int r = world->rank();
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    Net straight(5, dtype), first(5, dtype);
    optim::Zero1AdamW zs({{"zero1.dense", straight.params(), world}}, kOpts);
    train_zero1(straight, zs, r, 6, 0.5);

    optim::Zero1AdamW z1({{"zero1.dense", first.params(), world}}, kOpts);
    train_zero1(first, z1, r, 3, 0.5);
    std::map<std::string, at::Tensor> saved;  // what the checkpoint writes: copies of this rank's state
    for (auto& [k, v] : z1.state()) saved[k] = v.clone();
    std::vector<at::Tensor> weights;
    for (auto& t : first.tensors()) weights.push_back(t.detach().clone());

    Net resumed(99, dtype);  // other initial values: everything must come from the checkpoint
    {
      torch::NoGradGuard g;
      auto dst = resumed.tensors();
      for (size_t i = 0; i < dst.size(); ++i) dst[i].copy_(weights[i]);
    }
    optim::Zero1AdamW z2({{"zero1.dense", resumed.params(), world}}, kOpts);
    z2.load_state(saved);
    EXPECT_EQ(z2.steps(), 3);
    train_zero1(resumed, z2, r, 3, 0.5, /*first_step=*/3);
    auto pa = straight.tensors(), pb = resumed.tensors();
    for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "param " << i;
    for (auto& [k, v] : zs.state()) EXPECT_TRUE(torch::equal(v, z2.state().at(k))) << k;
  }
}

TEST(Zero1, ResumeWithOtherDpSizeOrWithoutZero1IsAnError) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int W = world->size();
  Net a(2, at::kFloat), b(2, at::kFloat);
  optim::Zero1AdamW saved({{"zero1.dense", a.params(), world}}, kOpts);
  optim::Zero1AdamW single({{"zero1.dense", b.params(), nullptr}}, kOpts);  // dp = 1
  try {
    single.load_state(saved.state());
    FAIL() << "loading a dp=" << W << " shard at dp=1 must fail";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer state 'zero1.dense' was sharded (ZeRO-1) over " +
                                         std::to_string(W) + " data-parallel ranks but this run shards it over 1; "
                                         "resume with the same data-parallel size"),
              std::string::npos)
        << e.what();
  }
  optim::AdamW plain(b.params(), kOpts);
  try {
    saved.load_state(plain.state());
    FAIL() << "plain AdamW state must not load into ZeRO-1";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer state has no 'zero1.dense.layout': the checkpoint was written "
                                         "without ZeRO-1 (optim.zero1: false)"),
              std::string::npos)
        << e.what();
  }
}

// Experts as the Trainer wires them: dense parameters over the whole group,
// expert parameters (different per ep rank) over their edp replicas, divided by ep.
TEST(Zero1, ExpertGroupOverEdpMatchesPlainPath) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int R = world->size(), r = world->rank();
  const int ep = 2, edp = R / ep;
  std::vector<std::vector<int>> ep_groups(edp), edp_groups(ep);  // rank = e + ep·d
  for (int k = 0; k < R; ++k) {
    ep_groups[k / ep].push_back(k);
    edp_groups[k % ep].push_back(k);
  }
  auto ep_comm = dist::new_groups(ep_groups, "test/ep");
  auto edp_comm = edp > 1 ? dist::new_groups(edp_groups, "test/edp") : nullptr;
  parallel::ParallelContext ctx;
  ctx.ep = ep_comm;

  struct Model {
    Net dense;
    at::Tensor expert;  // [13, 3]: this ep rank's expert
    Model(int ep_rank) : dense(4, at::kFloat) {
      torch::manual_seed(40 + ep_rank);
      expert = torch::randn({13, 3}).requires_grad_(true);
    }
    at::Tensor loss(const at::Tensor& x) {
      return (x.matmul(dense.w1) + dense.b1).tanh().matmul(expert).pow(2).mean() + dense.loss(x);
    }
  };
  Model plain(r % ep), sharded(r % ep);
  auto dense_of = [](Model& m) { return m.dense.params(); };
  optim::ParamSet pe{{"expert", plain.expert, optim::Sharding::kExpert}};
  optim::ParamSet se{{"expert", sharded.expert, optim::Sharding::kExpert}};
  optim::ParamSet all = dense_of(plain);
  all.push_back(pe.front());
  optim::AdamW ref(all, kOpts);
  optim::GradSync dsync(dense_of(plain), world), esync(pe, edp_comm);
  optim::Zero1AdamW zero({{"zero1.dense", dense_of(sharded), world}, {"zero1.experts", se, edp_comm, double(ep)}},
                         kOpts);
  for (int s = 0; s < 4; ++s) {
    at::Tensor x = batch_of(r, s);
    dsync.prepare(true);
    esync.prepare(true);
    plain.loss(x).backward();
    dsync.finish();
    esync.finish();
    {
      torch::NoGradGuard g;
      plain.expert.mutable_grad().div_(double(ep));
    }
    double na = optim::clip_grad_norm(all, 0.5, ctx);
    ref.step(kOpts.lr);
    ref.zero_grad();

    sharded.loss(x).backward();
    zero.reduce_gradients();
    double nb = zero.clip_grad_norm(0.5, ctx);
    zero.step(kOpts.lr);
    zero.zero_grad();
    EXPECT_NEAR(na, nb, 1e-12 * na) << "step " << s;
  }
  EXPECT_LE(rel_diff(sharded.expert, plain.expert), 1e-6);
  auto pa = plain.dense.tensors(), pb = sharded.dense.tensors();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_LE(rel_diff(pb[i], pa[i]), 1e-6) << "param " << i;
}
