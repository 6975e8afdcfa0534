// ZeRO-2 and ZeRO-3 under pipeline parallelism, through the Trainer and
// pipeline_forward_backward every pipelined stage uses: three copies of a
// tied-embedding model from one seed at pp 2 (np 2: dp 1; np 4: dp 2) train
// the same micro-batches with optim.zero 0, 2 and 3 — 1F1B and the
// interleaved schedule, several steps with clipping and weight decay. Each
// backward's gradients are reduce-scattered while the schedule runs; the
// tied embedding's first- and last-stage gradients are summed over the
// reduced shards (its own bucket on both stages), so its two copies stay
// bit-identical, as with plain pp.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <memory>

#include "../model/test_models.h"
#include "zero_hparams.h"
#include "hpcrl/algo/training/pipeline_train.h"
#include "hpcrl/algo/training/train_step.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/distributed/mesh.h"
#include "hpcrl/distributed/mesh_comms.h"
#include "hpcrl/model/decoder_model.h"

using namespace hpcrl;

namespace {

constexpr int kSteps = 3;
constexpr int kMicroBatches = 4;  // a multiple of pp, as the interleaved schedule needs

using hpcrl::testing::zero_test_hparams;

// pp 2 over the world; dp is what is left.
parallel::ParallelContext pp2_context() {
  dist::ParallelSizes sizes;
  sizes.pp = 2;
  dist::Mesh mesh(sizes, 0, dist::init(nullptr, nullptr).size, "zero-pp");
  dist::MeshComms comms = dist::create_mesh_comms(mesh);
  parallel::ParallelContext ctx;
  ctx.pp = comms.pp;
  ctx.dp = comms.dp;
  ctx.grad = comms.dp_sp;
  return ctx;
}

// 4 layers, tied embeddings, no attention biases (a key bias's gradient is
// rounding noise that AdamW turns into full steps; see zero3_mpi_test.cpp).
ModelArch tied_arch() {
  return hpcrl::testing::test_arch(hpcrl::testing::tiny_arch("llama", /*tied=*/true)).num_layers(4).build();
}

struct PipelinedRole {
  config::ModelConfig config;
  algo::Role role;

  PipelinedRole(int zero, parallel::pipeline::Schedule schedule, int virtual_stages) {
    config.name = "policy";
    config.optim.zero = zero;
    config.parallel.pp = 2;
    config.parallel.pp_schedule = schedule;
    role.name = "policy";
    role.config = &config;
    role.ctx = pp2_context();
    model::ModelOptions o;
    o.seed = 11;
    o.pp_virtual_stages = virtual_stages;
    role.model = std::make_shared<model::DecoderModel>(tied_arch(), role.ctx, o);
    role.model->train();
  }
};

// Rows of this rank's dp replica for (step, micro-batch): ids [2, 12], the same on both stages.
at::Tensor batch(const algo::Role& role, int step, int micro) {
  const int replica = role.ctx.dp ? role.ctx.dp->rank() : 0;
  torch::manual_seed(1000 + 97 * step + 13 * micro + replica);
  return torch::randint(0, role.model->arch().vocab_size, {2, 12}, at::kLong);
}

// Trains kSteps steps of kMicroBatches; returns each step's pre-clip gradient norm.
std::vector<double> train(algo::Role& role) {
  algo::Trainer trainer(role, zero_test_hparams(), kSteps);
  EXPECT_EQ(role.model->parameter_units() != nullptr, role.config->optim.zero == 3);
  std::vector<double> norms;
  const int rank = dist::init(nullptr, nullptr).rank;
  for (int s = 0; s < kSteps; ++s) {
    std::vector<model::StageBatch> mbs;
    std::vector<at::Tensor> targets;
    for (int k = 0; k < kMicroBatches; ++k) {
      mbs.push_back({batch(role, s, k), {}, {}});
      targets.push_back(at::roll(mbs.back().ids, {-1}, {1}));
    }
    auto loss = [&](int i, const at::Tensor& hidden) {
      return -role.model->token_logprobs(hidden, targets[i], false).logprobs.mean() / double(kMicroBatches);
    };
    algo::pipeline_forward_backward(role, trainer, mbs, loss, std::vector<double>(kMicroBatches, 0.0));
    norms.push_back(trainer.finish_step("sft", s, rank));
  }
  return norms;
}  // the Trainer gathers ZeRO-3's parameters for good

double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  return ((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item<double>();
}

// The first and the last stage hold model.embed_tokens.weight; true if both copies are equal bit for bit.
bool tied_copies_equal(algo::Role& role) {
  const auto& pp = role.ctx.pp;
  at::Tensor w = role.model->named_parameters()["model.embed_tokens.weight"].detach().contiguous();
  at::Tensor other = at::empty_like(w);
  const int peer = 1 - pp->rank();
  auto sent = pp->send_async(w, peer, 77);
  pp->recv_async(other, peer, 77)->wait();
  sent->wait();
  return torch::equal(w, other);
}

// ZeRO-2 and ZeRO-3 against plain AdamW on the same pipelined ranks. Within
// a stage ZeRO-2 and 3 make the same arithmetic (each backward's gradients
// averaged over dp, then summed): bit-equal at dp ≤ 2 (an average of two
// values has one rounding). Against plain (sum, then average) the roundings
// differ: 2e-5 as in zero3_mpi_test.cpp.
void expect_zero_follows_plain_under_pp(parallel::pipeline::Schedule schedule, int virtual_stages) {
  if (dist::init(nullptr, nullptr).size % 2 != 0) GTEST_SKIP() << "pp 2 needs an even world";
  PipelinedRole plain(0, schedule, virtual_stages), zero2(2, schedule, virtual_stages),
      zero3(3, schedule, virtual_stages);
  ASSERT_TRUE(model::holds_tied_pipeline_embedding(*plain.role.model)) << "both stages hold the tied embedding";
  const auto a = train(plain.role), b = train(zero2.role), c = train(zero3.role);
  EXPECT_EQ(zero3.role.model->parameter_units(), nullptr);
  EXPECT_GT(a.front(), zero_test_hparams().grad_clip) << "the test must clip";
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_NEAR(b[s], a[s], 1e-5 * a[s]) << "ZeRO-2 grad norm at step " << s;
    EXPECT_NEAR(c[s], a[s], 1e-5 * a[s]) << "ZeRO-3 grad norm at step " << s;
  }
  auto pa = plain.role.model->named_parameters(), pb = zero2.role.model->named_parameters(),
       pc = zero3.role.model->named_parameters();
  ASSERT_EQ(pa.size(), pc.size());
  for (const auto& item : pa) {
    EXPECT_LE(rel_diff(pb[item.key()], item.value()), 2e-5) << "ZeRO-2 " << item.key();
    EXPECT_LE(rel_diff(pc[item.key()], item.value()), 2e-5) << "ZeRO-3 " << item.key();
    EXPECT_TRUE(torch::equal(pc[item.key()], pb[item.key()])) << "ZeRO-3 against ZeRO-2: " << item.key();
  }
  EXPECT_TRUE(tied_copies_equal(zero2.role)) << "ZeRO-2: the tied embedding's two copies drifted apart";
  EXPECT_TRUE(tied_copies_equal(zero3.role)) << "ZeRO-3: the tied embedding's two copies drifted apart";
}

TEST(ZeroPipeline, OneFOneBEqualsPlainAdamW) {
  expect_zero_follows_plain_under_pp(parallel::pipeline::Schedule::_1f1b, 1);
}

TEST(ZeroPipeline, InterleavedEqualsPlainAdamW) {
  expect_zero_follows_plain_under_pp(parallel::pipeline::Schedule::interleaved, 2);
}

// Each backward of the schedule is a reduction pass of its own: beside its
// shard a rank holds the buckets of one backward that wait for their turn,
// never the stage's whole gradient.
TEST(ZeroPipeline, Zero2HoldsTheShardPlusAFewBuckets) {
  if (dist::init(nullptr, nullptr).size % 2 != 0) GTEST_SKIP() << "pp 2 needs an even world";
  PipelinedRole m(2, parallel::pipeline::Schedule::_1f1b, 1);
  m.config.optim.bucket_mb = 0.01;  // ~2.6 K fp32 elements: many buckets per stage
  int64_t whole = 0;
  for (const auto& p : m.role.model->parameters()) whole += p.nbytes();
  algo::Trainer trainer(m.role, zero_test_hparams(), 1);
  std::vector<model::StageBatch> mbs;
  std::vector<at::Tensor> targets;
  for (int k = 0; k < kMicroBatches; ++k) {
    mbs.push_back({batch(m.role, 0, k), {}, {}});
    targets.push_back(at::roll(mbs.back().ids, {-1}, {1}));
  }
  auto loss = [&](int i, const at::Tensor& hidden) {
    return -m.role.model->token_logprobs(hidden, targets[i], false).logprobs.mean();
  };
  algo::pipeline_forward_backward(m.role, trainer, mbs, loss, std::vector<double>(kMicroBatches, 0.0));
  trainer.finish_step("sft", 0, dist::init(nullptr, nullptr).rank);
  auto& sharded = dynamic_cast<optim::ShardedAdamW&>(trainer.optimizer());
  const optim::ShardLayout& layout = sharded.layout(0);
  ASSERT_GT(layout.buckets.size(), 8u);
  // Had the schedule's backwards been one pass, every micro-batch after the
  // first would reopen every bucket until the end: the whole gradient again beside the shard.
  const int64_t shard = layout.shard * 4;
  EXPECT_LT(sharded.peak_gradient_bytes() - shard, whole)
      << "peak " << sharded.peak_gradient_bytes() << " B beside a shard of " << shard << " B; whole stage " << whole;
}

}  // namespace
