// ZeRO-3 against plain data parallelism on the same ranks, through the Trainer
// every stage uses: two copies of a model from one seed, the same batches per
// rank, several steps of several micro-batches with clipping and weight decay;
// one trains with optim.zero 0 (dp all-reduce + AdamW), one with zero 2 and one
// with zero 3 (parameters sharded and gathered per layer, gradients
// reduce-scattered per layer, AdamW on the shard). Layouts: dp (2 or 4 ranks), dp2 × tp2 and ep2
// with a MoE model, with and without activation checkpointing. Also what a rank
// holds: the shard, the outer unit and at most two gathered layers (also while
// a checkpoint copies the model or the engine generates with it), and the
// parameters are whole again when the Trainer goes.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "../model/mpi_layout.h"
#include "../model/test_models.h"
#include "zero_hparams.h"
#include "hpcrl/algo/training/train_step.h"
#include "hpcrl/model/decoder_model.h"
#include "hpcrl/model/lora.h"
#include "hpcrl/model/streamed_save.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/rollout/engine.h"

using namespace hpcrl;

namespace {

struct Layout {
  int tp = 1, ep = 1;
  bool checkpointing = false;
  at::ScalarType dtype = at::kFloat;
  int micro_batches = 3;
  bool lora = false;  // adapters on q_proj and v_proj, the base frozen
};

using hpcrl::testing::zero_test_hparams;

// One role on every rank of the world with layout `l` and optim.zero `zero`.
struct TrainedModel {
  config::ModelConfig config;
  algo::Role role;

  TrainedModel(const ModelArch& arch, const Layout& l, int zero) {
    config.name = "policy";
    config.optim.zero = zero;
    role.name = "policy";
    role.config = &config;
    role.ctx = hpcrl::testing::layout_context(l.tp, 1, l.ep);
    if (l.ep > 1) role.edp = dist::create_mesh_comms(role_mesh(l)).edp;
    model::ModelOptions o;
    o.seed = 11;
    o.activation_checkpointing = l.checkpointing;
    role.model = std::make_shared<model::DecoderModel>(arch, role.ctx, o);
    if (l.lora) model::attach_lora(*role.model, model::LoraSpec{{4, 8.0, 0.0}, {"q_proj", "v_proj"}}, 5);
    role.model->to(l.dtype);
    role.model->train();
  }
  static dist::Mesh role_mesh(const Layout& l) {
    dist::ParallelSizes sizes;
    sizes.tp = l.tp;
    sizes.ep = l.ep;
    return dist::Mesh(sizes, 0, dist::init(nullptr, nullptr).size, "test");
  }
};

// Rows of this rank's data-parallel replica: ids [2, 12], the same for its tp ranks.
at::Tensor batch(const algo::Role& role, int step, int micro) {
  const int replica = role.ctx.dp ? role.ctx.dp->rank() : 0;
  torch::manual_seed(1000 + 97 * step + 13 * micro + replica);
  return torch::randint(0, role.model->arch().vocab_size, {2, 12}, at::kLong);
}

// Trains `steps` steps; returns each step's mean loss and pre-clip norm.
std::vector<std::pair<double, double>> train(TrainedModel& m, algo::Trainer& trainer, const Layout& l, int steps) {
  std::vector<std::pair<double, double>> out;
  const int rank = dist::init(nullptr, nullptr).rank;
  for (int s = 0; s < steps; ++s) {
    double loss_sum = 0;
    for (int k = 0; k < l.micro_batches; ++k) {
      trainer.begin_micro_batch(k + 1 == l.micro_batches);
      at::Tensor ids = batch(m.role, s, k);
      auto out_fwd = m.role.model->forward(ids);
      at::Tensor targets = at::roll(ids, {-1}, {1});
      at::Tensor loss = -m.role.model->token_logprobs(out_fwd.hidden, targets, false).logprobs.mean() +
                        out_fwd.aux_loss;
      (loss / double(l.micro_batches)).backward();
      loss_sum += loss.item<double>();
    }
    const double norm = trainer.finish_step("sft", s, rank);
    out.push_back({loss_sum / l.micro_batches, norm});
  }
  return out;
}

double rel_diff(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor x = a.to(at::kDouble), y = b.to(at::kDouble);
  return ((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item<double>();
}

std::vector<std::pair<double, double>> run(TrainedModel& m, const Layout& l, int steps) {
  algo::Trainer t(m.role, zero_test_hparams(), steps);
  EXPECT_EQ(m.role.model->parameter_units() != nullptr, m.config.optim.zero == 3);
  return train(m, t, l, steps);
}  // the Trainer gathers ZeRO-3's parameters for good

// ZeRO-3 makes ZeRO-2's arithmetic (each micro-batch's gradients averaged over
// dp, then summed; AdamW on the shard), only with the parameters gathered per
// layer and the buckets cut per layer. On 2 ranks that is bit-equal to ZeRO-2
// (an average of two values has one rounding, whatever the bucket); on 4 the
// MPI reduction adds in an order that depends on the message size, and three
// AdamW steps carry that rounding to ~1e-5 relative on the largest elements
// (measured: up to 7.5e-6). Against plain dp (sum, then average) the roundings
// differ too: within 2e-5 with three micro-batches a step, within 5e-6 with one
// (measured: 1.6e-6 at 4 ranks).
void expect_zero3_follows_plain(const ModelArch& arch, const Layout& l) {
  if (!hpcrl::testing::world_fits(l.tp * l.ep)) GTEST_SKIP() << "needs a multiple of " << l.tp * l.ep << " ranks";
  const int steps = 3;
  TrainedModel plain(arch, l, 0), zero2(arch, l, 2), zero3(arch, l, 3);
  const auto a = run(plain, l, steps), c = run(zero2, l, steps), b = run(zero3, l, steps);
  EXPECT_EQ(zero3.role.model->parameter_units(), nullptr);
  EXPECT_GT(a.front().second, zero_test_hparams().grad_clip) << "the test must clip";
  for (int s = 0; s < steps; ++s) {
    EXPECT_NEAR(a[s].first, b[s].first, 1e-5 * std::abs(a[s].first)) << "loss at step " << s;
    EXPECT_NEAR(a[s].second, b[s].second, 1e-5 * a[s].second) << "grad norm at step " << s;
  }
  const double tolerance = l.micro_batches == 1 ? 5e-6 : 2e-5;
  const bool two_ranks = dist::init(nullptr, nullptr).size == 2;
  auto pa = plain.role.model->named_parameters(), pb = zero3.role.model->named_parameters(),
       pc = zero2.role.model->named_parameters();
  for (const auto& item : pa) {
    const at::Tensor& x = pb[item.key()];
    if (two_ranks) EXPECT_TRUE(torch::equal(x, pc[item.key()])) << item.key() << " against ZeRO-2";
    else EXPECT_LE(rel_diff(x, pc[item.key()]), 1e-5) << item.key() << " against ZeRO-2";
    if (l.dtype == at::kFloat) EXPECT_LE(rel_diff(x, item.value()), tolerance) << item.key();
    else EXPECT_TRUE(torch::equal(x, item.value())) << item.key();
  }
}

// No attention biases: the gradient of a key bias is zero but for rounding
// (softmax ignores a constant added to every key), and AdamW turns rounding
// noise into full-size steps of either sign, so no two summation orders agree on it.
ModelArch dense_arch() { return hpcrl::testing::tiny_arch("llama"); }
ModelArch moe_arch() { return hpcrl::testing::test_arch(hpcrl::testing::tiny_moe_arch()).attention_bias(false).build(); }

TEST(Zero3, DenseDataParallelEqualsPlainAdamW) { expect_zero3_follows_plain(dense_arch(), {}); }

TEST(Zero3, WithActivationCheckpointingEqualsPlainAdamW) {
  Layout l;
  l.checkpointing = true;
  expect_zero3_follows_plain(hpcrl::testing::tiny_arch("llama", /*tied=*/false), l);
}

TEST(Zero3, TensorParallelTimesDataParallelEqualsPlainAdamW) {
  if (dist::init(nullptr, nullptr).size < 4) GTEST_SKIP() << "dp2 x tp2 needs 4 ranks";
  Layout l;
  l.tp = 2;
  expect_zero3_follows_plain(dense_arch(), l);
}

TEST(Zero3, OneMicroBatchAStepIsWithin5e6OfPlainAdamW) {
  Layout l;
  l.micro_batches = 1;
  expect_zero3_follows_plain(dense_arch(), l);
}

TEST(Zero3, ExpertParallelEqualsPlainAdamW) {
  Layout l;
  l.ep = 2;
  expect_zero3_follows_plain(moe_arch(), l);
}

// LoRA: the frozen base is sharded too (in the same units as the adapters)
// and gathered around each layer; the adapters train as with plain dp, the
// base stays what it was, and between steps the base holds no data either.
TEST(Zero3, LoraWithShardedBaseEqualsPlainLora) {
  Layout l;
  l.lora = true;
  expect_zero3_follows_plain(dense_arch(), l);
  TrainedModel m(dense_arch(), l, 3);
  const at::Tensor base = m.role.model->named_parameters()["model.layers.1.self_attn.q_proj.weight"];
  const at::Tensor before = base.detach().clone();
  ASSERT_FALSE(base.requires_grad());
  algo::Trainer t(m.role, zero_test_hparams(), 2);
  train(m, t, l, 2);
  EXPECT_EQ(base.storage().nbytes(), 0u) << "the frozen base is released between steps";
  model::WholeParameters whole(*m.role.model);
  EXPECT_TRUE(torch::equal(base, before)) << "the frozen base is unchanged";
}

// bf16: one micro-batch per step (ZeRO-3 averages each micro-batch's bf16
// gradients over dp before summing, as ZeRO-2 does): bit-equal parameters
// (bf16 rounds away what the fp32 reduction orders leave).
TEST(Zero3, Bf16IsBitEqualWithOneMicroBatch) {
  Layout l;
  l.dtype = at::kBFloat16;
  l.micro_batches = 1;
  expect_zero3_follows_plain(dense_arch(), l);
}

// Bytes of a unit's parameters on this rank.
int64_t unit_bytes(model::DecoderModel& m, int64_t unit) {
  int64_t bytes = 0;
  for (const auto& item : m.named_parameters())
    if (model::parameter_unit_of(item.key()) == unit) bytes += item.value().nbytes();
  return bytes;
}

TEST(Zero3, HoldsTheShardPlusTheOuterUnitAndTwoLayers) {
  Layout l;
  TrainedModel m(hpcrl::testing::test_arch(hpcrl::testing::tiny_arch("llama", /*tied=*/false)).num_layers(4).build(), l, 3);
  const int W = dist::init(nullptr, nullptr).size;
  const int64_t layers = m.role.model->arch().num_layers;
  ASSERT_GE(layers, 3) << "the bound is only tighter than the whole model with three layers or more";
  int64_t whole = 0, largest_layer = 0;
  for (const auto& item : m.role.model->named_parameters()) whole += item.value().nbytes();
  for (int64_t u = 0; u < layers; ++u) largest_layer = std::max(largest_layer, unit_bytes(*m.role.model, u));
  const int64_t outer = unit_bytes(*m.role.model, model::ParameterUnits::kOuter);
  algo::Trainer t(m.role, zero_test_hparams(), 2);
  auto* units = dynamic_cast<algo::Zero3Units*>(m.role.model->parameter_units());
  ASSERT_NE(units, nullptr);
  train(m, t, l, 2);
  // Between steps a layer holds no data: its storage was freed, not kept.
  const at::Tensor q = m.role.model->named_parameters()["model.layers.1.self_attn.q_proj.weight"];
  EXPECT_EQ(q.storage().nbytes(), 0u);
  // A checkpoint's copy is made unit by unit (within the same bound) and holds the values a whole-model scope shows.
  const io::NamedTensors copy = model::gather_full_weights(*m.role.model);
  const int64_t peak = units->peak_gathered_bytes();
  {
    model::WholeParameters whole(*m.role.model);
    auto params = m.role.model->named_parameters();
    ASSERT_EQ(copy.size(), params.size());
    for (const auto& [name, t] : copy) EXPECT_TRUE(torch::equal(t, params[name])) << name;
  }
  // W·Sb padding adds at most W - 1 elements per unit.
  const int64_t pad = int64_t(W) * 4 * (layers + 1);
  EXPECT_LE(peak, outer + 2 * largest_layer + pad)
      << "gathered at once: outer unit " << outer << " B, layers of " << largest_layer << " B; whole model " << whole;
  EXPECT_LT(peak, whole);
  // The optimizer's state and the shard are 1/W of the plain ones (plus padding).
  const int64_t shard_bytes = t.optimizer().state_bytes() / 2;  // two fp32 moments per owned element
  EXPECT_LE(shard_bytes, whole / W + pad);
}

// A 12-layer model after one ZeRO-3 step, with the sizes the bounds on
// gathered parameters are stated in.
struct TrainedTwelveLayers {
  static ModelArch arch() {
    return hpcrl::testing::test_arch(hpcrl::testing::tiny_arch("llama", /*tied=*/false)).num_layers(12).build();
  }
  static int64_t largest_layer_of(model::DecoderModel& m) {
    int64_t bytes = 0;
    for (int64_t u = 0; u < 12; ++u) bytes = std::max(bytes, unit_bytes(m, u));
    return bytes;
  }
  static int64_t whole_of(model::DecoderModel& m) {
    int64_t bytes = 0;
    for (const auto& item : m.named_parameters()) bytes += item.value().nbytes();
    return bytes;
  }

  TrainedModel m{arch(), Layout{}, 3};
  const int64_t whole = whole_of(*m.role.model), largest_layer = largest_layer_of(*m.role.model),
                outer = unit_bytes(*m.role.model, model::ParameterUnits::kOuter);
  algo::Trainer trainer{m.role, zero_test_hparams(), 1};
  algo::Zero3Units* units = dynamic_cast<algo::Zero3Units*>(m.role.model->parameter_units());

  TrainedTwelveLayers() { train(m, trainer, Layout{}, 1); }
  // The outer unit and `layers` layers, plus W·Sb padding (at most W - 1 elements per unit).
  int64_t bound(int64_t layers) const {
    return outer + layers * largest_layer + int64_t(dist::init(nullptr, nullptr).size) * 4 * 13;
  }
  std::string sizes() const {
    return "outer unit " + std::to_string(outer) + " B, layers of " + std::to_string(largest_layer) +
           " B; whole model " + std::to_string(whole);
  }
};

// A checkpoint of a ZeRO-3 model is written tensor by tensor: each layer is
// gathered when the writer reaches its first tensor and released at the next
// layer's, the outer unit is held throughout. Twelve layers, so the writer's
// name order (layers 0, 1, 10, 11, 2, ...) is not the numeric one. The file
// holds the values a whole-model scope shows.
TEST(Zero3, StreamedCheckpointHoldsTheOuterUnitAndThreeLayers) {
  TrainedTwelveLayers t;
  ASSERT_NE(t.units, nullptr);
  const auto& world = dist::init(nullptr, nullptr);
  ASSERT_TRUE(model::can_stream_save(*t.m.role.model, model::AdapterView::merged));
  const std::string dir = std::filesystem::temp_directory_path() / "hpcrl_zero3_streamed_save";
  if (world.rank == 0) std::filesystem::remove_all(dir);
  model::save_pretrained(*t.m.role.model, dir, /*writer=*/world.rank == 0);
  EXPECT_LE(t.units->peak_gathered_bytes(), t.bound(3)) << t.sizes();
  EXPECT_LT(t.units->peak_gathered_bytes(), t.whole / 2);
  model::WholeParameters scope(*t.m.role.model);
  if (world.rank != 0) return;
  io::TensorStore saved(dir);
  auto params = t.m.role.model->named_parameters();
  EXPECT_EQ(saved.names().size(), params.size());
  for (const auto& item : params) EXPECT_TRUE(torch::equal(saved.load_tensor(item.key()), item.value())) << item.key();
}

// The engine packs a ZeRO-3 model layer by layer from its shards (the call
// holds the outer unit and at most two layers, not the whole model), and
// samples what a model that was never sharded samples with the same weights.
// Rank 1 asks for no prompts: it still takes part in its group's gathers.
TEST(Zero3, GenerationPacksLayerByLayerAndSamplesAsTheWholeModel) {
  TrainedTwelveLayers t;
  ASSERT_NE(t.units, nullptr);
  const auto& world = dist::init(nullptr, nullptr);
  // The twin: the trained weights in a model without parameter units.
  io::NamedTensors trained = model::gather_full_weights(*t.m.role.model);
  auto twin = std::make_shared<model::DecoderModel>(TrainedTwelveLayers::arch(), t.m.role.ctx, model::ModelOptions{});
  model::load_weights(*twin, std::map<std::string, at::Tensor>(trained.begin(), trained.end()));
  rollout::EngineOptions options;
  options.max_batch = 4;
  rollout::SamplingParams sampling;
  sampling.max_new_tokens = 6;
  sampling.seed = 3;
  const std::vector<std::vector<int32_t>> prompts =
      world.rank == 1 ? std::vector<std::vector<int32_t>>{} : std::vector<std::vector<int32_t>>{{2, 5, 7}, {9, 4}};
  const auto sharded = rollout::Engine(t.m.role.model, nullptr, options).generate(prompts, 3, sampling);
  EXPECT_LE(t.units->peak_gathered_bytes(), t.bound(2)) << t.sizes();
  EXPECT_LT(t.units->peak_gathered_bytes(), t.whole / 2);
  const auto plain = rollout::Engine(twin, nullptr, options).generate(prompts, 3, sampling);
  ASSERT_EQ(sharded.size(), plain.size());
  EXPECT_EQ(sharded.size(), prompts.size() * 3);
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(sharded[i].tokens, plain[i].tokens) << "sample " << i;
    EXPECT_EQ(sharded[i].logprobs, plain[i].logprobs) << "sample " << i;
  }
}

// Loading a checkpoint into a ZeRO-3 model (as --resume does) walks the units:
// each gathered, written, handed to the shards and released, so the rank never
// holds the gathered model; afterwards every parameter holds the loaded value.
TEST(Zero3, LoadingWalksTheUnitsAndEveryShardTakesTheLoadedValues) {
  TrainedTwelveLayers t;
  ASSERT_NE(t.units, nullptr);
  model::ModelOptions other;
  other.seed = 29;  // weights unlike the trained model's
  model::DecoderModel source(TrainedTwelveLayers::arch(), t.m.role.ctx, other);
  io::NamedTensors loaded = model::gather_full_weights(source);
  const std::map<std::string, at::Tensor> by_name(loaded.begin(), loaded.end());
  model::load_weights(*t.m.role.model, by_name);
  EXPECT_LE(t.units->peak_gathered_bytes(), t.bound(2)) << t.sizes();
  EXPECT_LT(t.units->peak_gathered_bytes(), t.whole / 2);
  const at::Tensor q = t.m.role.model->named_parameters()["model.layers.5.self_attn.q_proj.weight"];
  EXPECT_EQ(q.storage().nbytes(), 0u) << "a loaded layer is released again";
  model::WholeParameters scope(*t.m.role.model);
  for (const auto& item : t.m.role.model->named_parameters())
    EXPECT_TRUE(torch::equal(item.value(), by_name.at(item.key()))) << item.key();
}

}  // namespace
