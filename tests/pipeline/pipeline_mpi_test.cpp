// Multi-rank equivalence of pipeline parallelism with the single-rank model.
// Every rank builds the whole model (same seed) as the reference and its pp
// stage of the pipelined one, runs the same batch, and compares the step's
// loss and the gradient of EVERY parameter it holds (tied embedding: on both
// the first and the last stage) with the reference's full-batch values at
// float32 tolerance. Covered: pp=2 and pp=4 × {gpipe, 1f1b, interleaved_1f1b}
// × micro-batches {1, 2, 4, 8} (interleaved: where m % pp == 0; elsewhere the
// exact error), an untied qwen3 model, an MoE model, pp=2×tp=2 and pp=2×dp=2,
// forward-only log-probs, stage-only weight loading and the pp weight gather.
// Runs under mpirun -np 2 and -np 4; a layout larger than the world is skipped
// (the -np 4 job runs it); larger worlds run it as data-parallel replicas.
#include <gtest/gtest.h>
#include <torch/utils.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/distributed/mesh.h"
#include "hpcrl/distributed/mesh_comms.h"
#include "hpcrl/model/pipeline_stage.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/parallel/pipeline/executor.h"
#include "hpcrl/parallel/pipeline/forward_only.h"
#include "hpcrl/trace/reader.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/error.h"
#include "model/test_models.h"

namespace hpcrl {
namespace {

using model::DecoderModel;
using model::ModelOptions;
namespace pipe = parallel::pipeline;

struct Layout {
  parallel::ParallelContext ctx;
  int dp_rank = 0, dp_size = 1;
};

// tp × pp over the world; dp is what is left. Collective over the world.
Layout make_layout(int tp, int pp) {
  const auto& w = dist::init(nullptr, nullptr);
  dist::ParallelSizes sizes;
  sizes.tp = tp;
  sizes.pp = pp;
  dist::Mesh mesh(sizes, 0, w.size, "pipe");
  dist::MeshComms comms = dist::create_mesh_comms(mesh);
  Layout l;
  l.ctx.tp = tp > 1 ? comms.tp : nullptr;
  l.ctx.pp = comms.pp;
  l.ctx.dp = comms.dp;
  l.ctx.grad = comms.dp_sp;
  l.dp_rank = comms.dp->rank();
  l.dp_size = comms.dp->size();
  return l;
}

bool world_fits(int ranks) { return dist::init(nullptr, nullptr).size % ranks == 0; }

// tiny_arch (tests/model/test_models.h) with 8 layers instead of 2, enough for the pp splits below.
ModelArch arch8(const std::string& family = "qwen2", bool tied = true) {
  return testing::test_arch(testing::tiny_arch(family, tied)).num_layers(8).build();
}

struct Batch {
  at::Tensor ids, targets, mask, positions;  // [B, T]
  int64_t rows() const { return ids.size(0); }
  Batch rows_slice(int64_t first, int64_t n) const {
    return {ids.narrow(0, first, n), targets.narrow(0, first, n), mask.narrow(0, first, n),
            positions.narrow(0, first, n)};
  }
};

Batch make_batch(int64_t B = 8, int64_t T = 8) {
  at::Generator gen = at::detail::createCPUGenerator(321);
  Batch b;
  b.ids = at::randint(64, {B, T}, gen, at::kLong);
  b.targets = at::randint(64, {B, T}, gen, at::kLong);
  b.mask = at::ones({B, T}, at::kLong);
  b.mask.index_put_({1, torch::indexing::Slice(0, 3)}, 0);  // left padding
  b.mask.index_put_({B - 1, T - 1}, 0);                     // right padding
  b.positions = testing::positions_from_mask(b.mask);
  return b;
}

// A micro-batch's share of the full-batch loss: token sums over the batch's token count.
at::Tensor batch_loss(DecoderModel& m, const at::Tensor& hidden, const Batch& b, double total_tokens) {
  auto lp = m.token_logprobs(hidden, b.targets, /*with_entropy=*/false);
  at::Tensor w = b.mask.to(at::kFloat);
  at::Tensor loss = -(lp.logprobs * w).sum();
  if (m.options().value_head) loss = loss + 0.5 * (m.values(hidden).pow(2) * w).sum();
  return loss / total_tokens;
}

void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const double err = (got - want).abs().max().item<double>();
  const double scale = std::max(1.0, want.abs().max().item<double>());
  EXPECT_LE(err, 1e-5 * scale) << what << ": max abs diff " << err;
}

// Runs `batch` through the pipelined model in `m` equal micro-batches of rows.
// aux_scale: weight of each micro-batch's MoE aux loss in the step loss.
pipe::PipelineStats pipelined_step(DecoderModel& par, const Batch& batch, double total_tokens, pipe::Schedule schedule,
                                   int m, int v, double aux_scale = 1.0) {
  const int64_t rows = batch.rows() / m;
  std::vector<Batch> mbs;
  for (int i = 0; i < m; ++i) mbs.push_back(batch.rows_slice(i * rows, rows));
  pipe::PipelineStep step;
  step.forward = [&](int i, int chunk, const at::Tensor& input) {
    const Batch& b = mbs[i];
    auto out = model::forward_chunk(par, chunk, input, {b.ids, b.positions, b.mask});
    at::Tensor aux = out.aux_loss * aux_scale;
    if (!par.pipeline_layout().is_last_chunk(chunk)) return pipe::ChunkOutput{out.hidden, aux};
    return pipe::ChunkOutput{{}, batch_loss(par, out.hidden, b, total_tokens) + aux};
  };
  step.activation_buffer = [&](int i) { return model::activation_buffer(par, mbs[i].ids); };
  return pipe::run_pipeline(par.parallel_context().pp, step, {schedule, m, v});
}

// Compares this rank's loss and every gradient it holds with the reference.
void expect_matches_reference(DecoderModel& par, DecoderModel& ref, double loss, double ref_loss) {
  EXPECT_NEAR(loss, ref_loss, 1e-5 * std::max(1.0, std::abs(ref_loss))) << "loss";
  auto ref_params = ref.named_parameters();
  auto specs = par.shard_specs();
  int held = 0;
  for (const auto& p : par.named_parameters()) {
    ASSERT_TRUE(ref_params.contains(p.key())) << p.key();
    ASSERT_TRUE(p.value().grad().defined()) << "no gradient for " << p.key();
    const auto& spec = specs.at(p.key());
    expect_close(p.value().grad(), spec.slice(ref_params[p.key()].grad()), "grad " + p.key());
    ++held;
  }
  // Together the stages hold every parameter once, plus the tied embedding's second copy.
  at::Tensor count = at::full({1}, held, at::kLong);
  const auto& ctx = par.parallel_context();
  if (ctx.pp_size() > 1) ctx.pp->all_reduce(count);
  const bool second_copy = ctx.pp_size() > 1 && par.arch().tie_word_embeddings;
  EXPECT_EQ(count.item<int64_t>(), static_cast<int64_t>(ref_params.size()) + (second_copy ? 1 : 0));
}

struct Case {
  int pp;
  pipe::Schedule schedule;
  int m;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = pipe::schedule_name(info.param.schedule);
  for (char& c : s)
    if (c == '_') c = 'X';
  return "pp" + std::to_string(info.param.pp) + "_" + s + "_m" + std::to_string(info.param.m);
}

class PipelineEquivalence : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineEquivalence, LossAndGradientsEqualSingleRank) {
  const Case c = GetParam();
  if (!world_fits(c.pp)) GTEST_SKIP() << "needs a multiple of " << c.pp << " ranks";
  Layout layout = make_layout(1, c.pp);
  const bool interleaved = c.schedule == pipe::Schedule::interleaved;
  const int v = interleaved ? 2 : 1;
  ModelOptions opts;
  opts.value_head = true;
  opts.seed = 5;
  DecoderModel ref(arch8(), parallel::ParallelContext{}, opts);
  opts.pp_virtual_stages = v;
  DecoderModel par(arch8(), layout.ctx, opts);

  Batch batch = make_batch();
  const double tokens = batch.mask.sum().item<double>();
  if (interleaved && c.m % c.pp != 0) {
    try {
      pipelined_step(par, batch, tokens, c.schedule, c.m, v);
      ADD_FAILURE() << "interleaved_1f1b accepted m=" << c.m << " with pp=" << c.pp;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                "pipeline schedule interleaved_1f1b needs the number of micro-batches to be a multiple of pp, got " +
                    std::to_string(c.m) + " micro-batches for pp=" + std::to_string(c.pp) + "; use " +
                    std::to_string((c.m / c.pp + 1) * c.pp) + " micro-batches, or the 1f1b schedule");
    }
    return;
  }
  auto out = ref.forward(batch.ids, batch.positions, batch.mask);
  at::Tensor ref_loss = batch_loss(ref, out.hidden, batch, tokens);
  ref_loss.backward();

  pipe::PipelineStats stats = pipelined_step(par, batch, tokens, c.schedule, c.m, v);
  model::sync_tied_embedding_grad(par);
  expect_matches_reference(par, ref, stats.loss, ref_loss.item<double>());
  EXPECT_GT(stats.compute_s, 0.0);
  EXPECT_GE(stats.step_s, stats.compute_s);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (int pp : {2, 4})
    for (auto s : {pipe::Schedule::gpipe, pipe::Schedule::_1f1b, pipe::Schedule::interleaved})
      for (int m : {1, 2, 4, 8}) cases.push_back({pp, s, m});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineEquivalence, ::testing::ValuesIn(all_cases()), case_name);

// Untied LM head (lm_head.weight on the last stage only) and qwen3's q/k norms.
TEST(Pipeline, UntiedQwen3Pp2) {
  if (!world_fits(2)) GTEST_SKIP();
  Layout layout = make_layout(1, 2);
  ModelOptions opts;
  opts.seed = 6;
  opts.pp_layers = {3, 5};  // an explicit, uneven layout
  DecoderModel ref(arch8("qwen3", false), parallel::ParallelContext{}, opts);
  DecoderModel par(arch8("qwen3", false), layout.ctx, opts);
  EXPECT_EQ(par.pipeline_layout().chunk_layers, (std::vector<int64_t>{3, 5}));
  Batch batch = make_batch();
  const double tokens = batch.mask.sum().item<double>();
  at::Tensor ref_loss = batch_loss(ref, ref.forward(batch.ids, batch.positions, batch.mask).hidden, batch, tokens);
  ref_loss.backward();
  auto stats = pipelined_step(par, batch, tokens, pipe::Schedule::_1f1b, 4, 1);
  model::sync_tied_embedding_grad(par);
  expect_matches_reference(par, ref, stats.loss, ref_loss.item<double>());
}

// MoE: the held layers get the experts the whole model has (seed draws of the
// layers a stage skips are made anyway), and each chunk's aux-loss share
// flows back through its own stage. Reference: the same micro-batches one
// after another on one rank (the aux loss depends on the batch composition).
TEST(Pipeline, MoePp2MatchesMicrobatchedSingleRank) {
  if (!world_fits(2)) GTEST_SKIP();
  Layout layout = make_layout(1, 2);
  const ModelArch a = testing::test_arch(testing::tiny_moe_arch()).num_layers(4).build();
  ModelOptions opts;
  opts.seed = 7;
  DecoderModel ref(a, parallel::ParallelContext{}, opts);
  DecoderModel par(a, layout.ctx, opts);
  auto ref_params = ref.named_parameters();
  for (const auto& p : par.named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), ref_params[p.key()])) << "initial weight " << p.key();

  const int m = 2;
  Batch batch = make_batch();
  const double tokens = batch.mask.sum().item<double>();
  double ref_loss = 0;
  for (int i = 0; i < m; ++i) {
    Batch b = batch.rows_slice(i * 4, 4);
    auto out = ref.forward(b.ids, b.positions, b.mask);
    at::Tensor l = batch_loss(ref, out.hidden, b, tokens) + out.aux_loss / m;
    l.backward();
    ref_loss += l.item<double>();
  }
  auto stats = pipelined_step(par, batch, tokens, pipe::Schedule::_1f1b, m, 1, 1.0 / m);
  model::sync_tied_embedding_grad(par);
  expect_matches_reference(par, ref, stats.loss, ref_loss);
}

// tp=2 inside each of 2 stages (4 ranks): tp-sliced gradients of the single-rank model.
TEST(Pipeline, Pp2Tp2) {
  if (!world_fits(4)) GTEST_SKIP() << "needs a multiple of 4 ranks";
  Layout layout = make_layout(2, 2);
  ModelOptions opts;
  opts.value_head = true;
  opts.seed = 8;
  DecoderModel ref(arch8(), parallel::ParallelContext{}, opts);
  DecoderModel par(arch8(), layout.ctx, opts);
  Batch batch = make_batch();
  const double tokens = batch.mask.sum().item<double>();
  at::Tensor ref_loss = batch_loss(ref, ref.forward(batch.ids, batch.positions, batch.mask).hidden, batch, tokens);
  ref_loss.backward();
  auto stats = pipelined_step(par, batch, tokens, pipe::Schedule::_1f1b, 4, 1);
  model::sync_tied_embedding_grad(par);
  expect_matches_reference(par, ref, stats.loss, ref_loss.item<double>());
}

// dp replicas of a pp=2 pipeline each run their share of the batch; one
// gradient all-reduce over dp after the step gives the full-batch gradient.
TEST(Pipeline, Pp2Dp2) {
  if (dist::init(nullptr, nullptr).size != 4) GTEST_SKIP() << "runs with exactly 4 ranks (dp=2)";
  Layout layout = make_layout(1, 2);
  ASSERT_EQ(layout.dp_size, 2);
  ModelOptions opts;
  opts.value_head = true;
  opts.seed = 9;
  DecoderModel ref(arch8(), parallel::ParallelContext{}, opts);
  DecoderModel par(arch8(), layout.ctx, opts);
  Batch batch = make_batch();
  const double tokens = batch.mask.sum().item<double>();
  at::Tensor ref_loss = batch_loss(ref, ref.forward(batch.ids, batch.positions, batch.mask).hidden, batch, tokens);
  ref_loss.backward();

  Batch mine = batch.rows_slice(layout.dp_rank * 4, 4);
  auto stats = pipelined_step(par, mine, tokens, pipe::Schedule::_1f1b, 2, 1);
  model::sync_tied_embedding_grad(par);
  for (auto& p : par.parameters()) layout.ctx.dp->all_reduce(p.mutable_grad());
  at::Tensor loss = at::full({1}, stats.loss, at::kDouble);
  layout.ctx.dp->all_reduce(loss);
  expect_matches_reference(par, ref, loss.item<double>(), ref_loss.item<double>());
}

// Forward-only log-probs (no autograd) equal the single-rank forward.
TEST(Pipeline, ForwardOnlyLogprobs) {
  for (int pp : {2, 4}) {
    if (!world_fits(pp)) continue;
    Layout layout = make_layout(1, pp);
    for (auto schedule : {pipe::Schedule::_1f1b, pipe::Schedule::interleaved}) {
      const int v = schedule == pipe::Schedule::interleaved ? 2 : 1;
      ModelOptions opts;
      opts.seed = 10;
      DecoderModel ref(arch8(), parallel::ParallelContext{}, opts);
      opts.pp_virtual_stages = v;
      DecoderModel par(arch8(), layout.ctx, opts);
      Batch batch = make_batch(16, 8);
      at::Tensor want;
      {
        at::NoGradGuard no_grad;
        auto out = ref.forward(batch.ids, batch.positions, batch.mask);
        want = ref.token_logprobs(out.hidden, batch.targets, false).logprobs;  // [16, 8]
      }
      const int m = 8;
      pipe::ForwardOnlyStep step;
      step.forward = [&](int i, int chunk, const at::Tensor& input) {
        Batch b = batch.rows_slice(i * 2, 2);
        auto out = model::forward_chunk(par, chunk, input, {b.ids, b.positions, b.mask});
        if (!par.pipeline_layout().is_last_chunk(chunk)) return out.hidden;
        return par.token_logprobs(out.hidden, b.targets, false).logprobs;
      };
      step.activation_buffer = [&](int i) { return model::activation_buffer(par, batch.ids.narrow(0, i * 2, 2)); };
      step.result_buffer = [&](int) { return at::empty({2, 8}, at::kFloat); };
      auto results = pipe::run_forward_only(layout.ctx.pp, step, m, schedule, v);
      ASSERT_EQ(results.size(), static_cast<size_t>(m));
      const std::string what = "pp=" + std::to_string(pp) + " " + pipe::schedule_name(schedule);
      expect_close(at::cat(results, 0), want, "forward-only log-probs " + what);
      // The same through the model-level helper, in 4 micro-batches of 4 rows.
      at::Tensor lp = model::pipelined_logprobs(par, {batch.ids, batch.positions, batch.mask}, batch.targets, 4, schedule);
      expect_close(lp, want, "pipelined_logprobs " + what);
    }
  }
}

// A stage holds and loads only its own tensors, and the pp weight gather
// reassembles the whole model on every rank.
TEST(Pipeline, StageWeightsLoadAndGather) {
  if (!world_fits(2)) GTEST_SKIP();
  Layout layout = make_layout(1, 2);
  ModelOptions opts;
  opts.value_head = true;
  opts.seed = 11;
  DecoderModel ref(arch8("qwen2", false), parallel::ParallelContext{}, opts);
  opts.init = false;
  DecoderModel par(arch8("qwen2", false), layout.ctx, opts);
  auto ref_params = ref.named_parameters();

  // Only this stage's tensors are offered: loading must not need any other.
  std::map<std::string, at::Tensor> mine;
  for (const auto& p : ref_params)
    if (par.holds_tensor(p.key())) mine[p.key()] = p.value().detach();
  EXPECT_LT(mine.size(), ref_params.size());
  model::load_weights(par, mine, "stage tensors");
  for (const auto& p : par.named_parameters()) EXPECT_TRUE(torch::equal(p.value(), ref_params[p.key()])) << p.key();
  const bool first = layout.ctx.pp_rank() == 0;
  EXPECT_EQ(par.holds_tensor("model.embed_tokens.weight"), first);
  EXPECT_EQ(par.holds_tensor("lm_head.weight"), !first);
  EXPECT_EQ(par.holds_tensor("model.layers.0.input_layernorm.weight"), first);
  EXPECT_EQ(par.holds_tensor("model.layers.7.input_layernorm.weight"), !first);
  EXPECT_EQ(par.on_other_stage("model.layers.7.input_layernorm.weight"), first);
  EXPECT_FALSE(par.on_other_stage("model.layers.8.input_layernorm.weight"));  // not a tensor of this model
  EXPECT_FALSE(ref.on_other_stage("model.layers.7.input_layernorm.weight"));

  auto full = model::gather_full_weights(par);
  EXPECT_EQ(full.size(), ref_params.size());
  for (const auto& [name, t] : full) {
    ASSERT_TRUE(ref_params.contains(name)) << name;
    EXPECT_TRUE(torch::equal(t, ref_params[name])) << name;
  }
}

// Every micro-batch's forward and backward is a span on its stage's lane with
// {microbatch, stage, chunk}, and each activation send records its bytes.
TEST(Pipeline, TraceShowsEveryPassOnItsStageLane) {
  if (!world_fits(2)) GTEST_SKIP();
  Layout layout = make_layout(1, 2);
  const auto& w = dist::init(nullptr, nullptr);
  at::Tensor id = at::full({1}, static_cast<int64_t>(getpid()), at::kLong);
  dist::world_comm()->broadcast(id, 0);
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("hpcrl-pp-trace-" + std::to_string(id.item<int64_t>()))).string();
  ModelOptions opts;
  opts.seed = 12;
  DecoderModel par(arch8(), layout.ctx, opts);
  Batch batch = make_batch();
  const int m = 4;
  trace::start(dir, w.rank);
  pipelined_step(par, batch, batch.mask.sum().item<double>(), pipe::Schedule::_1f1b, m, 1);
  const std::string file = trace::file_path();
  trace::stop();
  trace::TraceFile t = trace::read_trace_file(file);
  const int stage = layout.ctx.pp_rank();
  auto arg = [](const trace::Event& e, const std::string& k) {
    for (const auto& [key, v] : e.args)
      if (key == k) return v;
    return -1.0;
  };
  std::set<int> forwards, backwards;
  double sent_bytes = -1;
  for (const auto& e : t.events) {
    if (e.name == "pp/forward" || e.name == "pp/backward") {
      EXPECT_EQ(e.tid, trace::pipeline_lane(stage)) << e.name;
      EXPECT_EQ(arg(e, "stage"), stage);
      EXPECT_EQ(arg(e, "chunk"), stage);
      (e.name == "pp/forward" ? forwards : backwards).insert(static_cast<int>(arg(e, "microbatch")));
    }
    if (e.name == "pp/send_forward") sent_bytes = arg(e, "bytes");
  }
  EXPECT_EQ(forwards, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(backwards, (std::set<int>{0, 1, 2, 3}));
  // [B/m, T, C] float32 activations leave stage 0; the last stage sends none.
  EXPECT_EQ(sent_bytes, stage == 0 ? 2.0 * 8 * 32 * 4 : -1.0);
  dist::world_comm()->barrier();
  if (w.rank == 0) std::filesystem::remove_all(dir);
}

// forward() on a stage is a clear error pointing at the pipeline API.
TEST(Pipeline, StageRefusesWholeModelForward) {
  if (!world_fits(2)) GTEST_SKIP();
  Layout layout = make_layout(1, 2);
  DecoderModel par(arch8(), layout.ctx, ModelOptions{});
  Batch batch = make_batch();
  try {
    par.forward(batch.ids);
    ADD_FAILURE() << "forward() ran on a pipeline stage";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("this rank holds only pp stage"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace hpcrl
