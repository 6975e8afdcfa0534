// Pipeline bubble and step time: the decoder split over pp = (world size)
// stages, trained for a step of m micro-batches with each schedule, against
// the same model and micro-batches on one rank (plain gradient accumulation,
// measured in the same run on rank 0 while the others wait).
//
// The measured bubble of a stage is its idle share of the step: (step time −
// time inside its forward/backward passes) / step time, from the executor's
// timestamps (PipelineStats). The table reports the mean and the largest over
// stages beside the theory (each from the rank's shortest of --iters steps:
// the machine is shared, and noise only ever adds time), (p−1)/(m+p−1) for gpipe and 1f1b and
// (p−1)/(v·m+p−1) for interleaved (v = 2), and the step time against pp=1.
//   OMP_NUM_THREADS=1 mpirun -np 2 build/benchmarks/pipeline/bench_pipeline [--layers 8] [--hidden 256]
//       [--seq 128] [--rows 2] [--iters 5]
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/distributed/mesh.h"
#include "hpcrl/distributed/mesh_comms.h"
#include "hpcrl/model/pipeline_stage.h"
#include "hpcrl/parallel/pipeline/executor.h"

namespace {

using namespace hpcrl;
namespace pipe = parallel::pipeline;
using Clock = std::chrono::steady_clock;

struct Args {
  int64_t layers = 8, hidden = 256, seq = 128, rows = 2;
  int iters = 5;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const long v = std::atol(argv[i + 1]);
    if (k == "--layers") a.layers = v;
    else if (k == "--hidden") a.hidden = v;
    else if (k == "--seq") a.seq = v;
    else if (k == "--rows") a.rows = v;
    else if (k == "--iters") a.iters = static_cast<int>(v);
    else std::fprintf(stderr, "unknown flag %s\n", k.c_str());
  }
  return a;
}

ModelArch bench_arch(const Args& a) {
  ModelArch m;
  m.family = "llama";
  m.vocab_size = 256;
  m.hidden_size = a.hidden;
  m.intermediate_size = a.hidden * 11 / 4;
  m.num_layers = a.layers;
  m.num_heads = 8;
  m.num_kv_heads = 4;
  m.head_dim = a.hidden / 8;
  m.max_position_embeddings = 4096;
  m.tie_word_embeddings = true;
  return m;
}

struct MicroBatches {
  std::vector<at::Tensor> ids, targets;
};

MicroBatches make_batches(const ModelArch& arch, const Args& a, int m) {
  at::Generator gen = at::detail::createCPUGenerator(1);
  MicroBatches b;
  for (int i = 0; i < m; ++i) {
    b.ids.push_back(at::randint(arch.vocab_size, {a.rows, a.seq}, gen, at::kLong));
    b.targets.push_back(at::randint(arch.vocab_size, {a.rows, a.seq}, gen, at::kLong));
  }
  return b;
}

// Best (shortest) step time of gradient accumulation over the m micro-batches on one rank.
double single_rank_step(const ModelArch& arch, const Args& a, const MicroBatches& mb) {
  model::DecoderModel m(arch, parallel::ParallelContext{});
  const int n = static_cast<int>(mb.ids.size());
  auto step = [&] {
    m.zero_grad();
    for (int i = 0; i < n; ++i) {
      auto out = m.forward(mb.ids[i]);
      (-m.token_logprobs(out.hidden, mb.targets[i], false).logprobs.mean() / n).backward();
    }
  };
  step();
  std::vector<double> t;
  for (int it = 0; it < a.iters; ++it) {
    auto t0 = Clock::now();
    step();
    t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return *std::min_element(t.begin(), t.end());
}

// Stats of this rank's shortest step of one schedule.
pipe::PipelineStats pipelined_step(model::DecoderModel& m, const Args& a, const MicroBatches& mb,
                                   pipe::Schedule schedule, int v) {
  const int n = static_cast<int>(mb.ids.size());
  pipe::PipelineStep step;
  step.forward = [&](int i, int chunk, const at::Tensor& input) {
    auto out = model::forward_chunk(m, chunk, input, {mb.ids[i], {}, {}});
    if (!m.pipeline_layout().is_last_chunk(chunk)) return pipe::ChunkOutput{out.hidden, {}};
    return pipe::ChunkOutput{{}, -m.token_logprobs(out.hidden, mb.targets[i], false).logprobs.mean() / n};
  };
  step.activation_buffer = [&](int i) { return model::activation_buffer(m, mb.ids[i]); };
  const auto& pp = m.parallel_context().pp;
  auto run = [&] {
    m.zero_grad();
    auto s = pipe::run_pipeline(pp, step, {schedule, n, v});
    model::sync_tied_embedding_grad(m);
    return s;
  };
  run();
  std::vector<pipe::PipelineStats> all;
  for (int it = 0; it < a.iters; ++it) all.push_back(run());
  return *std::min_element(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.step_s < y.step_s; });
}

}  // namespace

int main(int argc, char** argv) {
  const dist::WorldInfo& w = dist::init(&argc, &argv);
  const Args a = parse(argc, argv);
  const int pp = w.size;
  const ModelArch arch = bench_arch(a);
  dist::ParallelSizes sizes;
  sizes.pp = pp;
  dist::Mesh mesh(sizes, 0, w.size, "bench");
  dist::MeshComms comms = dist::create_mesh_comms(mesh);
  auto world = dist::world_comm();
  if (w.rank == 0)
    std::printf("pipeline bubble: pp=%d, %lld layers, d=%lld, %lld×%lld tokens per micro-batch, best of %d steps, "
                "%d thread(s) per rank\n\n| schedule | m | step ms (pp=%d) | step ms (pp=1) | speed-up | bubble "
                "mean | bubble max | theory |\n|---|---|---|---|---|---|---|---|\n",
                pp, (long long)a.layers, (long long)a.hidden, (long long)a.rows, (long long)a.seq, a.iters,
                at::get_num_threads(), pp);
  for (auto schedule : {pipe::Schedule::gpipe, pipe::Schedule::_1f1b, pipe::Schedule::interleaved}) {
    const int v = schedule == pipe::Schedule::interleaved ? 2 : 1;
    if (a.layers < pp * v) continue;
    parallel::ParallelContext ctx;
    ctx.pp = comms.pp;
    model::ModelOptions opts;
    opts.pp_virtual_stages = v;
    model::DecoderModel m(arch, ctx, opts);
    for (int n : {4, 8, 16}) {
      const MicroBatches mb = make_batches(arch, a, n);
      double base = 0;
      if (w.rank == 0) base = single_rank_step(arch, a, mb);
      world->barrier();
      pipe::PipelineStats s = pipelined_step(m, a, mb, schedule, v);
      at::Tensor mine = at::tensor({s.step_s, s.idle_s() / s.step_s}, at::kDouble);
      at::Tensor all = world->all_gather(mine, 0).view({pp, 2});
      if (w.rank != 0) continue;
      const double step = all.select(1, 0).max().item<double>();
      const double mean = all.select(1, 1).mean().item<double>(), most = all.select(1, 1).max().item<double>();
      std::printf("| %s | %d | %.1f | %.1f | %.2f× | %.3f | %.3f | %.3f |\n", pipe::schedule_name(schedule), n,
                  step * 1e3, base * 1e3, base / step, mean, most, pipe::theoretical_bubble(schedule, n, pp, v));
      std::fflush(stdout);
    }
  }
  dist::finalize();
  return 0;
}
