// The stage sequence of one run (see pipeline_runner.h).
#include "hpcrl/util/check.h"
#include "hpcrl/runner/pipeline_runner.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "hpcrl/algo/distill_stage.h"
#include "hpcrl/algo/grpo_stage.h"
#include "hpcrl/algo/ppo_stage.h"
#include "hpcrl/algo/sft_stage.h"
#include "hpcrl/algo/train_checkpoint.h"
#include "hpcrl/config/loader.h"
#include "hpcrl/config/render.h"
#include "hpcrl/dist/bootstrap.h"
#include "hpcrl/io/tensor_store.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/runner/data_loader.h"
#include "hpcrl/runner/preemption.h"
#include "hpcrl/runner/role_builder.h"
#include "hpcrl/trace/metrics.h"
#include "hpcrl/trace/summary.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/log.h"

namespace hpcrl::runner {
namespace stdfs = std::filesystem;

namespace {
std::string stage_dir_name(int index, const config::StageConfig& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02d-%s", index, config::to_string(s.kind).c_str());
  return buf;
}

// Steps (iterations) a stage is configured for; stop_at_accuracy may end it sooner.
int64_t configured_steps(const config::StageConfig& s) {
  switch (s.kind) {
    case config::StageKind::sft: return s.sft.steps;
    case config::StageKind::grpo: return s.grpo.iterations;
    case config::StageKind::ppo: return s.ppo.iterations;
    case config::StageKind::distill: return s.distill.steps;
  }
  return 0;
}

struct StageRow {
  std::string name;
  int64_t steps = 0, configured = 0;
  double seconds = 0;
  double accuracy = -1;
  bool skipped = false;  // completed in an earlier run (resume)
};

void print_final_table(const std::vector<StageRow>& rows, const std::string& run_dir) {
  std::string out = "\nstage            steps       held-out accuracy   seconds\n";
  for (const auto& r : rows) {
    char line[200];
    std::string acc = r.accuracy < 0 ? "-" : fmt::format("{:.2f} %", r.accuracy * 100);
    std::string steps = std::to_string(r.steps) + (r.steps != r.configured ? "/" + std::to_string(r.configured) : "");
    std::snprintf(line, sizeof line, "%-16s %-11s %-19s %s\n", r.name.c_str(), steps.c_str(), acc.c_str(),
                  r.skipped ? "(done before resume)" : fmt::format("{:.1f}", r.seconds).c_str());
    out += line;
  }
  std::fputs(out.c_str(), stdout);
  try {
    auto summary = trace::summarize_run(run_dir);
    trace::write_summary(summary, run_dir + "/trace");
    std::string md = trace::format_markdown(summary);
    std::printf("\ntime breakdown (trace/summary.md):\n%s\n", md.c_str());
  } catch (const std::exception& e) {
    spdlog::warn("trace summary not written: {}", e.what());
  }
  std::fflush(stdout);
}
}  // namespace

int run_pipeline(const RunOptions& options) {
  const auto& w = dist::world();
  auto world = dist::world_comm();
  config::ValidateOptions vo;
  vo.world = w.size;
  vo.require_weights = true;
  config::PipelineConfig cfg = config::load_pipeline_config(options.config_path, options.overrides, vo);
  const std::string root = options.out.empty() ? cfg.run.out : options.out;
  // Before the run directory exists: a device this build or node cannot use is bad input.
  const int gpu = dist::bind_device(config::to_string(cfg.run.device));

  // Rank 0 prepares the directory; the others wait (an error there ends the job).
  RunDirectory dir = w.rank == 0 ? RunDirectory::prepare(root, options.mode, config::to_yaml(cfg))
                                 : RunDirectory::attach(root, options.mode == RunDirMode::kResume);
  world->barrier();
  log::add_rank_file(dir.logs_dir());
  if (cfg.trace.chrome) trace::start(dir.trace_dir(), w.rank, {cfg.trace.chrome, cfg.trace.comm});
  install_stop_handlers();
  spdlog::info("run {} in {} on {} rank(s){}", cfg.run.name, root, w.size, dir.resumed() ? " (resuming)" : "");

  std::unique_ptr<trace::MetricsWriter> metrics;
  if (cfg.trace.metrics) metrics = std::make_unique<trace::MetricsWriter>(dir.metrics_path(), w.rank);

  Roles roles(cfg, w.rank, w.size, gpu < 0 ? at::Device(at::kCPU) : at::Device(at::kCUDA, static_cast<int8_t>(gpu)));
  std::map<std::string, algo::DataSplits> data;
  auto data_for = [&](const std::string& name) -> const algo::DataSplits& {
    auto it = data.find(name);
    if (it != data.end()) return it->second;
    // Lengths are counted with the tokenizer of the first role (all roles of a pipeline share one vocabulary).
    const auto& tok = *roles.get(cfg.models.front().name).tokenizer;
    return data.emplace(name, load_data_splits(*cfg.find_data(name), cfg.run, tok)).first->second;
  };

  std::vector<StageRow> rows;
  for (size_t i = 0; i < cfg.stages.size(); ++i) {
    const auto& stage = cfg.stages[i];
    const std::string sdir = dir.checkpoints_dir() + "/" + stage_dir_name(int(i), stage);
    StageRow row;
    row.name = stage_dir_name(int(i), stage);
    row.configured = configured_steps(stage);
    roles.snapshot_for(stage);
    const std::string latest = dir.resumed() ? algo::latest_checkpoint(sdir) : "";

    // A stage finished in an earlier run: take its trained roles' final weights and move on.
    if (dir.resumed() && stdfs::exists(sdir + "/complete.json")) {
      for (const auto& name : stage.trained_roles()) {
        auto& r = roles.get(name);
        if (r.member()) model::load_weights(*r.model, io::TensorStore(latest + "/" + name));
      }
      auto done = nlohmann::json::parse(fs::read_file(sdir + "/complete.json"));
      row.accuracy = done.value("eval_accuracy", -1.0);
      row.steps = done.value("steps", int64_t{0});
      row.skipped = true;
      rows.push_back(row);
      continue;
    }
    if (metrics && dir.resumed())
      metrics->truncate_after(int(i), latest.empty() ? -1 : algo::checkpoint_step(latest));

    algo::StageEnv env;
    env.pipeline = &cfg;
    env.stage = &stage;
    env.stage_index = int(i);
    env.world = world;
    env.metrics = metrics.get();
    env.role = [&](const std::string& n) -> algo::Role& { return roles.get(n); };
    env.data = data_for;
    env.should_stop = [&] { return stop_requested(world); };
    env.checkpoint_dir = sdir;
    env.checkpoint_every = cfg.run.checkpoint_every;
    env.keep_last = cfg.run.keep_last;
    if (!latest.empty()) env.resume_from = latest;

    spdlog::info("stage {} ({}) starts", i, config::to_string(stage.kind));
    auto t0 = std::chrono::steady_clock::now();
    algo::StageResult result;
    {
      trace::ScopedSpan span(config::to_string(stage.kind), {{"stage_index", double(i)}});
      switch (stage.kind) {
        case config::StageKind::sft: result = algo::run_sft(env); break;
        case config::StageKind::grpo: result = algo::run_grpo(env); break;
        case config::StageKind::ppo: result = algo::run_ppo(env); break;
        case config::StageKind::distill: result = algo::run_distill(env); break;
      }
    }
    row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    row.accuracy = result.eval_accuracy;
    row.steps = result.steps_done;
    if (result.stopped) {
      trace::stop();
      spdlog::warn("stopped at step {} of stage {} on request; checkpoint written. Continue with: hpcrl run {} --resume",
                   result.steps_done, i, options.config_path);
      return kExitResumable;
    }
    for (const auto& name : stage.trained_roles()) roles.mark_initialised(name);
    if (w.rank == 0)
      fs::write_file_atomic(sdir + "/complete.json",
                            nlohmann::json{{"steps", result.steps_done}, {"eval_accuracy", result.eval_accuracy},
                                           {"eval_loss", result.eval_loss}, {"seconds", row.seconds}}
                                .dump(1));
    rows.push_back(row);
  }
  world->barrier();
  trace::stop();
  world->barrier();
  if (w.rank == 0) print_final_table(rows, dir.root());
  return kExitOk;
}

}  // namespace hpcrl::runner
