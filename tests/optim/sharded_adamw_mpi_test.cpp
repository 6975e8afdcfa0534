// ZeRO-1 and ZeRO-2 against the plain path on the same ranks: N steps of a
// small net with per-rank batches of several micro-batches, once with dp
// all-reduce (GradSync) + clip_grad_norm + AdamW, once with reduce-scatter +
// sharded clip + sharded AdamW + all-gather. Sizes are chosen so the flat
// buffers do not divide by 2 or 4 (padding) and shards cut through parameters;
// ZeRO-2's buckets are 64 bytes, so the net's three parameters make three
// buckets. Also: state bytes per rank ≈ 1/dp, ZeRO-2's gradient bytes ≈ 1/dp
// with the full gradients released, exact resume from state(), a clear error
// when resuming with another dp size or stage, and the expert group (edp,
// 1/ep) as the Trainer wires it.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <algorithm>
#include <functional>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/optim/grad_clip.h"
#include "hpcrl/optim/grad_sync.h"
#include "hpcrl/optim/sharded_adamw.h"
#include "hpcrl/util/error.h"

using namespace hpcrl;

namespace {
const optim::AdamWOptions kOpts{1e-2, 0.9, 0.95, 1e-8, 0.1};
const int64_t kTestBucketBytes = 64;  // ZeRO-2 buckets of 16 fp32 / 32 bf16 elements
const int kMicroBatches = 3;

optim::ShardedAdamW sharded_adamw(std::vector<optim::ShardGroup> groups, int stage) {
  return optim::ShardedAdamW(std::move(groups), kOpts, stage, kTestBucketBytes);
}

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
template <class N>
std::vector<double> train_plain(N& net, optim::AdamW& opt, const dist::CommPtr& dp, int steps, double clip,
                                int micro_batches = kMicroBatches) {
  auto ps = net.params();
  optim::GradSync sync(ps, dp, /*bucket_bytes=*/128);
  parallel::ParallelContext ctx;
  std::vector<double> norms;
  for (int s = 0; s < steps; ++s) {
    for (int m = 0; m < micro_batches; ++m) {
      sync.prepare(m + 1 == micro_batches);
      net.loss(batch_of(dp->rank(), micro_batches * s + m)).backward();
    }
    sync.finish();
    norms.push_back(optim::clip_grad_norm(ps, clip, ctx));
    opt.step(kOpts.lr);
    opt.zero_grad();
  }
  return norms;
}

template <class N>
std::vector<double> train_sharded(N& net, optim::ShardedAdamW& opt, int rank, int steps, double clip,
                                  int first_step = 0, int micro_batches = kMicroBatches) {
  parallel::ParallelContext ctx;
  std::vector<double> norms;
  for (int s = first_step; s < first_step + steps; ++s) {
    for (int m = 0; m < micro_batches; ++m) {
      opt.begin_micro_batch(m + 1 == micro_batches);
      net.loss(batch_of(rank, micro_batches * s + m)).backward();
      if (opt.stage() == 2)
        for (const auto& t : net.tensors()) EXPECT_FALSE(t.grad().defined()) << "ZeRO-2 keeps no full gradient";
    }
    opt.reduce_gradients();
    norms.push_back(opt.clip_grad_norm(clip, ctx));
    opt.step(kOpts.lr);
    opt.zero_grad();
  }
  return norms;
}

// bf16: ZeRO-1 sums the micro-batches' bf16 gradients before the reduce, as
// plain dp does, so the parameters are bit-equal; ZeRO-2 averages each
// micro-batch first (other bf16 roundings), so it is compared bit for bit
// with one micro-batch per step.
void expect_same_training(at::ScalarType dtype, int stage) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int steps = 6;
  const int micro_batches = dtype != at::kFloat && stage == 2 ? 1 : kMicroBatches;
  const double clip = 0.5;  // below the early norms: the clip factor is exercised
  Net plain(3, dtype), sharded(3, dtype);
  optim::AdamW ref(plain.params(), kOpts);
  optim::ShardedAdamW zero = sharded_adamw({{"zero.dense", sharded.params(), world}}, stage);
  // 64-byte buckets: fp32 w2 | b1 | w1 (13, 13, 91 elements), bf16 w2 + b1 | w1 (26, 91).
  if (stage == 2) EXPECT_EQ(zero.layout(0).buckets.size(), dtype == at::kFloat ? 3u : 2u);
  auto a = train_plain(plain, ref, world, steps, clip, micro_batches);
  auto b = train_sharded(sharded, zero, world->rank(), steps, clip, 0, micro_batches);
  EXPECT_GT(a.front(), clip) << "the test must clip";
  // ZeRO-1 adds the same fp32 values in the same order as the plain path; ZeRO-2 averages before summing.
  const double norm_tolerance = stage == 1 ? 1e-12 : 1e-6;
  for (int s = 0; s < steps; ++s) EXPECT_NEAR(a[s], b[s], norm_tolerance * a[s]) << "grad norm at step " << s;
  auto pa = plain.tensors(), pb = sharded.tensors();
  for (size_t i = 0; i < pa.size(); ++i) {
    if (dtype == at::kFloat) EXPECT_LE(rel_diff(pb[i], pa[i]), 1e-6) << "param " << i;
    else EXPECT_TRUE(torch::equal(pb[i], pa[i])) << "bf16 param " << i;
  }
  if (dtype != at::kFloat) {
    // fp32 masters: every owned run equals the plain master's elements.
    auto st = ref.state();
    const std::vector<std::string> names{"w1", "b1", "w2"};
    at::Tensor mine = zero.state().at("zero.dense.master");
    for (const auto& seg : zero.layout(0).segments) {
      at::Tensor want = st.at(names[seg.param] + ".master").reshape(-1).slice(0, seg.param_offset,
                                                                              seg.param_offset + seg.length);
      EXPECT_LE(rel_diff(mine.slice(0, seg.shard_offset, seg.shard_offset + seg.length), want), 1e-6)
          << names[seg.param];
    }
  }
}
}  // namespace

TEST(Zero1, Fp32MatchesAllReduceAdamWWithDecayAndClipping) { expect_same_training(at::kFloat, 1); }

TEST(Zero1, Bf16ParamsWithFp32MastersMatchPlainAdamW) { expect_same_training(at::kBFloat16, 1); }

TEST(Zero2, Fp32MatchesAllReduceAdamWWithDecayAndClipping) { expect_same_training(at::kFloat, 2); }

TEST(Zero2, Bf16ParamsWithFp32MastersMatchPlainAdamW) { expect_same_training(at::kBFloat16, 2); }

// Wider than a step chunk (ShardedAdamW::kStepChunk, 2^21 elements): 4,202,499 + 13 +
// 1,211,809 = 5,414,321 elements. ZeRO-1 at dp 2: one bucket, shards of 2,707,161, so
// rank 0's is updated and gathered in two chunks cut inside `a` and rank 1's spans a, b
// and c. ZeRO-2 (64-byte buckets: a parameter each): a's 2,101,250-element shard, two.
struct WideNet {
  at::Tensor a, b, c;
  WideNet(int seed, at::ScalarType dtype) {
    torch::manual_seed(seed);
    a = torch::randn({2049, 2051}).to(dtype).requires_grad_(true);
    b = torch::randn({13}).to(dtype).requires_grad_(true);
    c = torch::randn({1201, 1009}).to(dtype).requires_grad_(true);
  }
  at::Tensor loss(const at::Tensor& x) {  // every element's gradient differs: 2·(p − s)/n
    const at::Tensor s = x.mean().to(a.scalar_type());
    return ((a - s).pow(2).mean() + (b - s).pow(2).mean() + (c - s).pow(2).mean()).to(at::kFloat);
  }
  optim::ParamSet params() {
    return {{"a", a, optim::Sharding::kReplicated}, {"b", b, optim::Sharding::kReplicated},
            {"c", c, optim::Sharding::kReplicated}};
  }
  std::vector<at::Tensor> tensors() const { return {a, b, c}; }
};

// One micro-batch a step and no clipping: at dp 2 each reduced gradient is the sum of the
// same two values as plain dp's all-reduce, and AdamW is elementwise, so an update and a
// gather cut into chunks must give plain AdamW's parameters bit for bit (at dp 4 the sums
// of four may be ordered differently: within 1e-6).
void expect_chunked_step_equals_plain(at::ScalarType dtype, int stage) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int steps = 3;
  const double no_clip = 1e9;
  WideNet plain(3, dtype), sharded(3, dtype);
  optim::AdamW ref(plain.params(), kOpts);
  optim::ShardedAdamW zero = sharded_adamw({{"zero.dense", sharded.params(), world}}, stage);
  int64_t largest = 0;
  for (const auto& bucket : zero.layout(0).buckets) largest = std::max(largest, bucket.shard);
  if (world->size() == 2) EXPECT_GT(largest, optim::ShardedAdamW::kStepChunk) << "the test must cut a shard";
  train_plain(plain, ref, world, steps, no_clip, 1);
  train_sharded(sharded, zero, world->rank(), steps, no_clip, 0, 1);
  auto pa = plain.tensors(), pb = sharded.tensors();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_FALSE(torch::equal(pb[i], WideNet(3, dtype).tensors()[i])) << "param " << i << " was not updated";
    if (world->size() == 2)
      EXPECT_TRUE(torch::equal(pb[i], pa[i])) << "param " << i << ": " << rel_diff(pb[i], pa[i]);
    else
      EXPECT_LE(rel_diff(pb[i], pa[i]), 1e-6) << "param " << i;
  }
}

TEST(Zero1, AShardLongerThanAStepChunkUpdatesAsPlainAdamW) { expect_chunked_step_equals_plain(at::kFloat, 1); }

TEST(Zero2, AShardLongerThanAStepChunkUpdatesAsPlainAdamW) { expect_chunked_step_equals_plain(at::kFloat, 2); }

TEST(Zero2, Bf16ShardLongerThanAStepChunkUpdatesAsPlainAdamW) {
  expect_chunked_step_equals_plain(at::kBFloat16, 2);
}

TEST(ShardedAdamW, StateBytesPerRankShrinkByDp) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int64_t W = world->size();
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    Net a(1, dtype), b(1, dtype), c(1, dtype);
    optim::AdamW plain(a.params(), kOpts);
    optim::ShardedAdamW zero1 = sharded_adamw({{"zero.dense", b.params(), world}}, 1);
    optim::ShardedAdamW zero2 = sharded_adamw({{"zero.dense", c.params(), world}}, 2);
    const int64_t per_elem = dtype == at::kFloat ? 8 : 12;  // two fp32 moments (+ fp32 master)
    EXPECT_EQ(plain.state_bytes(), 117 * per_elem);
    EXPECT_EQ(zero1.state_bytes(), (117 + W - 1) / W * per_elem);
    // ZeRO-2: one shard per bucket. fp32: buckets of 13, 13, 91 elements; bf16 (32 per bucket): 26 and 91.
    const int64_t shard2 = dtype == at::kFloat ? 2 * ((13 + W - 1) / W) + (91 + W - 1) / W
                                               : (26 + W - 1) / W + (91 + W - 1) / W;
    EXPECT_EQ(zero2.state_bytes(), shard2 * per_elem);
    for (const auto* zero : {&zero1, &zero2}) {
      // ≈ 1/dp: at most one padding element per rank and bucket more than an exact split.
      const int64_t buckets = int64_t(zero->layout(0).buckets.size());
      EXPECT_LE(zero->state_bytes() * W, plain.state_bytes() + buckets * W * per_elem);
      EXPECT_GE(zero->state_bytes() * W, plain.state_bytes());
    }
  }
}

// 64 parameters of 256 fp32 elements in 1 KiB buckets: a bucket per parameter.
// Plain dp holds all 64 KiB of gradients after the backward; ZeRO-2 holds its
// shard (64 KiB / W) plus the bucket being filled (its W·Sb buffer and the
// incoming gradient) and kInFlight buckets being reduced (W·Sb + Sb each).
TEST(Zero2, GradientBytesPerRankShrinkByDpAndNoFullGradientIsKept) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int64_t W = world->size();
  std::vector<at::Tensor> weights;
  optim::ParamSet ps;
  torch::manual_seed(7);
  for (int i = 0; i < 64; ++i) {
    weights.push_back(torch::randn({16, 16}).requires_grad_(true));
    ps.push_back({"w" + std::to_string(i), weights.back(), optim::Sharding::kReplicated});
  }
  optim::ShardedAdamW zero({{"zero2.dense", ps, world}}, kOpts, 2, /*bucket_bytes=*/1024);
  ASSERT_EQ(zero.layout(0).buckets.size(), 64u);
  for (int m = 0; m < 2; ++m) {
    zero.begin_micro_batch(m == 1);
    at::Tensor x = batch_of(int(world->rank()), m).narrow(1, 0, 1).expand({5, 16}).contiguous();  // [5, 16]
    for (const auto& w : weights) x = x.matmul(w).tanh();
    x.pow(2).mean().backward();
    for (const auto& w : weights) ASSERT_FALSE(w.grad().defined());
  }
  zero.reduce_gradients();
  const int64_t full = 64 * 256 * 4, shard = 64 * ((256 + W - 1) / W) * 4;
  const int64_t bucket = (256 + W - 1) / W * W * 4, part = (256 + W - 1) / W * 4;
  const int64_t bound = shard + bucket + 256 * 4 + optim::GradReduceScatter::kInFlight * (bucket + part);
  EXPECT_GE(zero.peak_gradient_bytes(), shard);
  EXPECT_LE(zero.peak_gradient_bytes(), bound);
  // dp 2: 32 + 1 + 1 + 2·1.5 = 37 KiB of 64; dp 4: 16 + 1 + 1 + 2·1.25 = 20.5 KiB.
  EXPECT_LT(zero.peak_gradient_bytes() * W, full + W * 6 * 1024) << "≈ 1/dp of the plain run's " << full;
}

TEST(ShardedAdamW, SaveLoadResumesBitIdentically) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int r = world->rank();
  for (int stage : {1, 2})
    for (auto dtype : {at::kFloat, at::kBFloat16}) {
      Net straight(5, dtype), first(5, dtype);
      optim::ShardedAdamW zs = sharded_adamw({{"zero.dense", straight.params(), world}}, stage);
      train_sharded(straight, zs, r, 6, 0.5);

      optim::ShardedAdamW z1 = sharded_adamw({{"zero.dense", first.params(), world}}, stage);
      train_sharded(first, z1, r, 3, 0.5);
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
      optim::ShardedAdamW z2 = sharded_adamw({{"zero.dense", resumed.params(), world}}, stage);
      z2.load_state(saved);
      EXPECT_EQ(z2.steps(), 3);
      train_sharded(resumed, z2, r, 3, 0.5, /*first_step=*/3);
      auto pa = straight.tensors(), pb = resumed.tensors();
      for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << "stage " << stage << " param " << i;
      for (auto& [k, v] : zs.state()) EXPECT_TRUE(torch::equal(v, z2.state().at(k))) << "stage " << stage << " " << k;
    }
}

namespace {
void expect_input_error(const std::function<void()>& load, const std::string& message) {
  try {
    load();
    FAIL() << "expected: " << message;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

}  // namespace

TEST(ShardedAdamW, ResumeWithOtherDpSizeOrStageIsAnError) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  const int W = world->size();
  Net a(2, at::kFloat), b(2, at::kFloat);
  optim::ShardedAdamW saved = sharded_adamw({{"zero1.dense", a.params(), world}}, 1);
  optim::ShardedAdamW single = sharded_adamw({{"zero1.dense", b.params(), nullptr}}, 1);  // dp = 1
  expect_input_error([&] { single.load_state(saved.state()); },
                     "optimizer state 'zero1.dense' was sharded (ZeRO-1) over " + std::to_string(W) +
                         " data-parallel ranks but this run shards it over 1; resume with the same data-parallel size");
  optim::AdamW plain(b.params(), kOpts);
  expect_input_error([&] { saved.load_state(plain.state()); },
                     "optimizer state has no 'zero1.dense.layout': the checkpoint was written with another "
                     "optim.zero setting (this run has zero: 1)");
  // The Trainer names the groups by stage, so ZeRO-1 state has no "zero2.*" keys.
  optim::ShardedAdamW zero2 = sharded_adamw({{"zero2.dense", b.params(), world}}, 2);
  expect_input_error([&] { zero2.load_state(saved.state()); },
                     "optimizer state has no 'zero2.dense.layout': the checkpoint was written with another "
                     "optim.zero setting (this run has zero: 2)");
  // Same stage, other buckets: the shards hold other elements.
  optim::ShardedAdamW coarse({{"zero2.dense", a.params(), world}}, kOpts, 2, /*bucket_bytes=*/1 << 20);
  expect_input_error([&] { zero2.load_state(coarse.state()); },
                     "optimizer state 'zero2.dense' was saved with 1 gradient buckets, this run cuts 3");
}

// Experts as the Trainer wires them: dense parameters over the whole group,
// expert parameters (different per ep rank) over their edp replicas, divided by ep.
namespace {
void expect_expert_group_matches_plain_path(int stage) {
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
  optim::ShardedAdamW zero =
      sharded_adamw({{"zero.dense", dense_of(sharded), world}, {"zero.experts", se, edp_comm, double(ep)}}, stage);
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

    zero.begin_micro_batch(/*last=*/true);
    sharded.loss(x).backward();
    zero.reduce_gradients();
    double nb = zero.clip_grad_norm(0.5, ctx);
    zero.step(kOpts.lr);
    zero.zero_grad();
    EXPECT_NEAR(na, nb, 1e-12 * na) << "stage " << stage << " step " << s;
  }
  EXPECT_LE(rel_diff(sharded.expert, plain.expert), 1e-6);
  auto pa = plain.dense.tensors(), pb = sharded.dense.tensors();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_LE(rel_diff(pb[i], pa[i]), 1e-6) << "param " << i;
}

}  // namespace

TEST(Zero1, ExpertGroupOverEdpMatchesPlainPath) { expect_expert_group_matches_plain_path(1); }

TEST(Zero2, ExpertGroupOverEdpMatchesPlainPath) { expect_expert_group_matches_plain_path(2); }

namespace {

// Every rank's state() on every rank (what a resume reads from the checkpoint's files).
std::vector<optim::SavedState> every_rank_state(const optim::ShardedAdamW& zero, const dist::CommPtr& world) {
  std::vector<std::map<std::string, at::Tensor>> by_rank(size_t(world->size()));
  for (const auto& [key, t] : zero.state()) {
    if (t.dim() == 0) {  // "step": the same everywhere
      for (auto& s : by_rank) s[key] = t;
      continue;
    }
    at::Tensor all = world->all_gather(t.contiguous(), 0);  // equal lengths on every rank
    for (int q = 0; q < world->size(); ++q) by_rank[size_t(q)][key] = all.narrow(0, q * t.numel(), t.numel()).clone();
  }
  std::vector<optim::SavedState> saved;
  for (int q = 0; q < world->size(); ++q)
    saved.push_back(optim::SavedState::in_memory(by_rank[size_t(q)], "rank " + std::to_string(q)));
  return saved;
}

// Element k of parameter `param` as the owner of that element in `zero`'s layout holds it, for every element a rank owns.
void expect_same_owned_elements(const optim::ShardedAdamW& owner, const optim::ShardedAdamW& whole,
                                const std::string& key) {
  const at::Tensor mine = owner.state().at(key), all = whole.state().at(key);
  std::map<size_t, int64_t> whole_offset;  // the one-rank layout: one segment per parameter
  for (const auto& seg : whole.layout(0).segments) whole_offset[seg.param] = seg.shard_offset - seg.param_offset;
  for (const auto& seg : owner.layout(0).segments) {
    const int64_t at_whole = whole_offset.at(seg.param) + seg.param_offset;
    EXPECT_TRUE(torch::equal(mine.narrow(0, seg.shard_offset, seg.length), all.narrow(0, at_whole, seg.length)))
        << key << " of parameter " << seg.param;
  }
}
}  // namespace

// Resumed at another dp size: the group's shards recut for one rank hold every
// owned element where the group held it, and recut back for the group they
// are the group's own state, padding included (bit-equal).
TEST(ShardedAdamW, StateRecutForOneRankAndBackIsTheGroupsState) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  for (int stage : {1, 2})
    for (auto dtype : {at::kFloat, at::kBFloat16}) {
      SCOPED_TRACE("stage " + std::to_string(stage) + (dtype == at::kFloat ? " fp32" : " bf16"));
      Net trained(5, dtype), alone(5, dtype), again(5, dtype);
      optim::ShardedAdamW group = sharded_adamw({{"zero.dense", trained.params(), world, 1, {}, {}, {0, 0}}}, stage);
      train_sharded(trained, group, world->rank(), 3, 0.5);
      optim::ShardedAdamW one = sharded_adamw({{"zero.dense", alone.params(), nullptr, 1, {}, {}, {0, 0}}}, stage);
      one.load_resharded(every_rank_state(group, world));
      EXPECT_EQ(one.steps(), 3);
      for (const char* key : {"zero.dense.exp_avg", "zero.dense.exp_avg_sq"}) expect_same_owned_elements(group, one, key);
      if (dtype != at::kFloat) expect_same_owned_elements(group, one, "zero.dense.master");

      optim::ShardedAdamW back = sharded_adamw({{"zero.dense", again.params(), world, 1, {}, {}, {0, 0}}}, stage);
      back.load_resharded({optim::SavedState::in_memory(one.state(), "the one-rank state")});
      for (const auto& [key, t] : group.state()) EXPECT_TRUE(torch::equal(t, back.state().at(key))) << key;
    }
}

TEST(ShardedAdamW, RecutNamesAMissingRankAndAStateWithoutReplicaKeys) {
  dist::init(nullptr, nullptr);
  auto world = dist::world_comm();
  Net a(2, at::kFloat), b(2, at::kFloat);
  optim::ShardedAdamW group = sharded_adamw({{"zero1.dense", a.params(), world, 1, {}, {}, {0, 0}}}, 1);
  optim::ShardedAdamW one = sharded_adamw({{"zero1.dense", b.params(), nullptr, 1, {}, {}, {0, 0}}}, 1);
  std::vector<optim::SavedState> saved = every_rank_state(group, world);
  saved.pop_back();  // the last rank's file is missing
  expect_input_error([&] { one.load_resharded(saved); },
                     "the checkpoint has no optimizer shard of 'zero1.dense' for rank " +
                         std::to_string(world->size() - 1) + " of its " + std::to_string(world->size()) +
                         "-rank group; copy every optimizer-rank-*.safetensors of the checkpoint");
  std::map<std::string, at::Tensor> old = group.state();
  old.erase("zero1.dense.replica");  // written before resharding was built
  expect_input_error([&] { one.load_resharded({optim::SavedState::in_memory(old, "step-000004/policy/optimizer-rank-00000")}); },
                     "step-000004/policy/optimizer-rank-00000: optimizer state 'zero1.dense' does not say which model "
                     "shard it is");
}
