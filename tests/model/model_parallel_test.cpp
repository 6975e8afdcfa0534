// Multi-rank equivalence of the whole model: every rank builds the single-rank
// model (same seed) as the reference and the tp/sp-split model, runs the same
// batch (left padding included) and compares its shard of everything — the
// weights, forward log-probs, entropy, values, the loss and EVERY parameter
// gradient — at float32 tolerance. Layouts: tp=2, tp=4 (KV heads replicated),
// sp=2, tp=2×sp=2; families qwen2 (QKV bias, tied) and qwen3 (q/k norm,
// untied), with and without activation checkpointing, packed rows (several
// sequences per row, attention kept within each), and an MoE model with ep=2. Runs under mpirun -np 2 and -np 4; a layout larger than the world
// is skipped there and runs in the -np 4 job. The same with LoRA adapters on
// every projection (only their factors and the value head train).
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/model/lora.h"
#include "hpcrl/model/streamed_save.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/parallel/sequence/ulysses.h"
#include "mpi_layout.h"
#include "test_models.h"

namespace hpcrl::model {
namespace {

namespace seq = parallel::sequence;

struct Batch {
  at::Tensor ids, targets, mask, positions;  // [B, T]
};

Batch make_batch() {
  at::Generator gen = at::detail::createCPUGenerator(123);
  Batch b;
  b.ids = at::randint(64, {2, 8}, gen, at::kLong);
  b.targets = at::randint(64, {2, 8}, gen, at::kLong);
  b.mask = at::ones({2, 8}, at::kLong);
  b.mask.index_put_({1, torch::indexing::Slice(0, 3)}, 0);  // row 1 left-padded (a whole sp=4 chunk)
  b.mask.index_put_({0, 7}, 0);                             // row 0 right-padded by one
  b.positions = testing::positions_from_mask(b.mask);
  return b;
}

// Packed rows (algo/training/micro_batches.h): sequences end to end, numbered by
// segment, positions from 0 in each; the sp=4 chunk boundaries fall inside
// sequences, so keys of one segment come from several ranks.
Batch make_packed_batch() {
  Batch b = make_batch();
  b.mask = torch::tensor({1, 1, 1, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 2, 2, 0}, torch::kLong).view({2, 8});
  b.positions = torch::tensor({0, 1, 2, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1, 0}, torch::kLong).view({2, 8});
  return b;
}

struct Outputs {
  at::Tensor logprobs, entropy, values, loss;
};

// Sum over (this rank's) tokens / number of real tokens in the whole batch.
Outputs run(DecoderModel& m, const Batch& full, const parallel::ParallelContext& ctx) {
  auto chunk = [&](const at::Tensor& t) { return seq::sequence_chunk(t, ctx.sp).contiguous(); };
  at::Tensor mask = chunk(full.mask);
  auto out = m.forward(chunk(full.ids), chunk(full.positions), mask);
  auto lp = m.token_logprobs(out.hidden, chunk(full.targets));
  at::Tensor v = m.values(out.hidden);
  at::Tensor w = (mask != 0).to(at::kFloat);
  const double n = (full.mask != 0).sum().item<double>();
  at::Tensor loss =
      (-(lp.logprobs * w).sum() + (v.pow(2) * w).sum() + 0.1 * (lp.entropy * w).sum()) / n + out.aux_loss;
  loss.backward();
  return {lp.logprobs.detach(), lp.entropy.detach(), v.detach(), loss.detach()};
}

void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double err = (got - want).abs().max().item<double>();
  const double scale = std::max(1.0, want.abs().max().item<double>());
  EXPECT_LE(err, 1e-5 * scale) << what << ": max abs diff " << err;
}

// Both models get the same adapters: attached from one seed, then every
// factor set to the same random full tensor (B ≠ 0, so the adapters matter).
void attach_same_adapters(DecoderModel& ref, DecoderModel& par, const LoraSpec& lora) {
  attach_lora(ref, lora, 11);
  attach_lora(par, lora, 11);
  at::Generator gen = at::detail::createCPUGenerator(31);
  std::map<std::string, at::Tensor> factors;
  for (const auto& p : ref.named_parameters())
    if (parallel::tensor::is_lora_tensor(p.key())) factors[p.key()] = at::empty(p.value().sizes()).normal_(0, 0.1, gen);
  factors["score.weight"] = ref.score->weight.detach().clone();  // the adapter view includes the value head
  load_weights(ref, factors, "random factors", AdapterView::adapter);
  load_weights(par, factors, "random factors", AdapterView::adapter);
}

// `recompute`: the split model uses activation checkpointing (its collectives
// then also run inside the backward's recomputation). `lora`: both models carry
// the same adapters; then only the factors and the value head have gradients.
void check_layout(int tp, int sp, const std::string& family, bool tied, bool recompute = false,
                  const Batch& batch = make_batch(), const std::optional<LoraSpec>& lora = std::nullopt) {
  if (!testing::world_fits(tp * sp)) GTEST_SKIP() << "needs a multiple of " << tp * sp << " ranks";
  parallel::ParallelContext ctx = testing::layout_context(tp, sp);
  ModelArch arch = testing::tiny_arch(family, tied);
  ModelOptions opts;
  opts.value_head = true;
  opts.seed = 11;
  DecoderModel ref(arch, parallel::ParallelContext{}, opts);
  opts.activation_checkpointing = recompute;
  DecoderModel par(arch, ctx, opts);
  if (lora) attach_same_adapters(ref, par, *lora);
  auto ref_params = ref.named_parameters();

  // Same full weights whatever the layout (seeded per HF tensor, then sliced).
  for (auto& [name, t] : gather_full_weights(par, AdapterView::base))
    EXPECT_TRUE(torch::equal(t, ref_params[name])) << name;
  if (lora) {  // the merge of gathered factors equals the single-rank merge
    std::map<std::string, at::Tensor> want;
    for (auto& [name, t] : gather_full_weights(ref)) want[name] = t;
    for (auto& [name, t] : gather_full_weights(par)) expect_close(t, want.at(name), "merged " + name);
  }

  Outputs want = run(ref, batch, parallel::ParallelContext{});
  Outputs got = run(par, batch, ctx);

  auto chunk = [&](const at::Tensor& t) { return seq::sequence_chunk(t, ctx.sp); };
  expect_close(got.logprobs, chunk(want.logprobs), "log-probs");
  expect_close(got.entropy, chunk(want.entropy), "entropy");
  expect_close(got.values, chunk(want.values), "values");
  at::Tensor loss = got.loss.clone();
  if (ctx.sp) ctx.sp->all_reduce(loss);  // each sp rank holds its tokens' share
  expect_close(loss, want.loss, "loss");

  // Gradients: sum each rank's share over sp (what the dp·sp gradient sync does), then
  // compare with this rank's slice of the single-rank gradient.
  int compared = 0, trainable = 0;
  for (const auto& p : ref_params) trainable += p.value().requires_grad();
  for (const auto& [name, spec] : par.shard_specs()) {
    if (!par.named_parameters()[name].requires_grad()) continue;  // frozen under LoRA
    at::Tensor g = par.named_parameters()[name].grad();
    ASSERT_TRUE(g.defined()) << name;
    g = g.clone();
    if (ctx.sp) ctx.sp->all_reduce(g);
    expect_close(g, spec.slice(ref_params[name].grad()), "grad " + name + " (" + spec.describe() + ")");
    ++compared;
  }
  EXPECT_EQ(compared, trainable);
  if (lora) EXPECT_LT(trainable, static_cast<int>(ref_params.size()));
}

LoraSpec all_projections() {
  return LoraSpec{{4, 8, 0.0}, {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}};
}

// Experts sharded over ep=2 (the other ranks of the world are edp replicas).
// Every rank feeds the same batch, so an expert's gradient collects the same
// contribution from each of the ep ranks that routed tokens to it: ep × the
// single-rank gradient; everything else equals the single-rank model.
TEST(ModelParallel, Ep2MoeModel) {
  const int ep = 2;
  if (!testing::world_fits(ep)) GTEST_SKIP() << "needs a multiple of 2 ranks";
  parallel::ParallelContext ctx = testing::layout_context(1, 1, ep);
  ModelArch arch = testing::tiny_moe_arch();
  ModelOptions opts;
  opts.value_head = true;
  opts.seed = 12;
  DecoderModel ref(arch, parallel::ParallelContext{}, opts);
  DecoderModel par(arch, ctx, opts);
  auto ref_params = ref.named_parameters();
  auto full = gather_full_weights(par);
  EXPECT_EQ(full.size(), ref_params.size());
  for (auto& [name, t] : full) EXPECT_TRUE(torch::equal(t, ref_params[name])) << name;
  EXPECT_LT(par.named_parameters().size(), ref_params.size());  // this rank holds half of the experts

  Batch batch = make_batch();
  Outputs want = run(ref, batch, parallel::ParallelContext{});
  Outputs got = run(par, batch, ctx);
  expect_close(got.logprobs, want.logprobs, "log-probs");
  expect_close(got.values, want.values, "values");
  expect_close(got.loss, want.loss, "loss incl. aux loss");
  for (const auto& p : par.named_parameters()) {
    const bool expert = p.key().find(".mlp.experts.") != std::string::npos;
    expect_close(p.value().grad(), ref_params[p.key()].grad() * (expert ? ep : 1), "grad " + p.key());
  }
}

// A tp 2 model saved tensor by tensor (every split tensor gathered when the
// writer reaches it) writes the single-rank model's file byte for byte.
TEST(ModelParallel, Tp2StreamedSaveWritesTheSingleRankFile) {
  if (!testing::world_fits(2)) GTEST_SKIP() << "needs a multiple of 2 ranks";
  const auto& world = dist::init(nullptr, nullptr);
  ModelOptions opts;
  opts.seed = 13;
  DecoderModel ref(testing::tiny_arch("qwen3", false), parallel::ParallelContext{}, opts);
  DecoderModel par(testing::tiny_arch("qwen3", false), testing::layout_context(2, 1), opts);
  ASSERT_TRUE(can_stream_save(par, AdapterView::merged));
  const std::string dir = std::filesystem::temp_directory_path() / "hpcrl_tp2_streamed_save";
  if (world.rank == 0) {
    std::filesystem::remove_all(dir);
    save_pretrained(ref, dir + "/one", true);
  }
  save_pretrained(par, dir + "/tp2", /*writer=*/world.rank == 0);  // every rank gathers, rank 0 writes
  if (world.rank != 0) return;
  auto bytes = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string a = bytes(dir + "/one/model.safetensors"), b = bytes(dir + "/tp2/model.safetensors");
  EXPECT_GT(a.size(), 1000u);
  EXPECT_TRUE(a == b) << a.size() << " bytes at one rank, " << b.size() << " at tp 2";
}

TEST(ModelParallel, Tp2Qwen2) { check_layout(2, 1, "qwen2", true); }
TEST(ModelParallel, Tp2Qwen3Untied) { check_layout(2, 1, "qwen3", false); }
TEST(ModelParallel, Tp4ReplicatedKvHeads) { check_layout(4, 1, "qwen2", false); }
TEST(ModelParallel, Sp2) { check_layout(1, 2, "qwen3", true); }
TEST(ModelParallel, Sp4KvHeadsRepeated) { check_layout(1, 4, "qwen2", true); }
TEST(ModelParallel, Tp2Sp2) { check_layout(2, 2, "qwen2", false); }
TEST(ModelParallel, Tp2Sp2ActivationCheckpointing) { check_layout(2, 2, "qwen3", true, /*recompute=*/true); }
TEST(ModelParallel, Tp2ActivationCheckpointing) { check_layout(2, 1, "qwen2", true, /*recompute=*/true); }
TEST(ModelParallel, Sp2PackedRows) { check_layout(1, 2, "qwen3", true, false, make_packed_batch()); }
TEST(ModelParallel, Sp4PackedRows) { check_layout(1, 4, "qwen2", true, false, make_packed_batch()); }
TEST(ModelParallel, Tp2Sp2PackedRows) { check_layout(2, 2, "qwen2", false, false, make_packed_batch()); }
// LoRA on every projection: column layers (q/k/v, gate/up) keep A whole and cut
// B, row layers (o, down) cut A and keep B whole; tp 4 also shares k/v chunks.
TEST(ModelParallel, Tp2Lora) { check_layout(2, 1, "qwen2", true, false, make_batch(), all_projections()); }
TEST(ModelParallel, Tp4LoraReplicatedKvHeads) {
  check_layout(4, 1, "qwen3", false, false, make_batch(), all_projections());
}
TEST(ModelParallel, Sp2Lora) { check_layout(1, 2, "qwen2", false, false, make_batch(), all_projections()); }
TEST(ModelParallel, Tp2Sp2LoraActivationCheckpointing) {
  check_layout(2, 2, "qwen3", true, /*recompute=*/true, make_batch(), all_projections());
}

}  // namespace
}  // namespace hpcrl::model
