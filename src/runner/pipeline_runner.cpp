// The stage sequence of one run (see pipeline_runner.h).
#include "hpcrl/runner/pipeline_runner.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>

#include "hpcrl/algo/stages/distill_stage.h"
#include "hpcrl/algo/stages/grpo_stage.h"
#include "hpcrl/algo/stages/ppo_stage.h"
#include "hpcrl/algo/stages/sft_stage.h"
#include "hpcrl/algo/stages/stop_inside.h"
#include "hpcrl/algo/checkpoint/checkpoint_integrity.h"
#include "hpcrl/algo/training/out_of_memory.h"
#include "hpcrl/algo/checkpoint/train_checkpoint.h"
#include "hpcrl/config/loader.h"
#include "hpcrl/config/render.h"
#include "hpcrl/config/resume_diff.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/distributed/plan.h"
#include "hpcrl/distributed/watchdog.h"
#include "hpcrl/io/checkpoint_state.h"
#include "hpcrl/io/tensor_store.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/runner/memory_check.h"
#include "hpcrl/runner/preemption.h"
#include "hpcrl/runner/role_builder.h"
#include "hpcrl/algo/training/step_sums.h"
#include "hpcrl/runner/span_device_timing.h"
#include "hpcrl/runner/stage_memory.h"
#include "hpcrl/runner/run_inputs.h"
#include "hpcrl/trace/metrics.h"
#include "hpcrl/trace/summary.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"
#include "hpcrl/util/log.h"
#include "hpcrl/util/overloaded.h"

namespace hpcrl::runner {
namespace stdfs = std::filesystem;

namespace {
std::string stage_dir_name(int index, const config::StageConfig& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02d-%s", index, config::to_string(s.kind()).c_str());
  return buf;
}

struct StageRow {
  std::string name;
  int64_t steps = 0, configured = 0;
  double seconds = 0;
  double accuracy = -1;
  bool skipped = false;  // completed in an earlier run (resume)
};

// The slowest any rank could be to stop (collective over the world): its longest
// stretch without a stop check and its longest checkpoint.
algo::StopLatency worst_stop_latency(const dist::CommPtr& world) {
  struct Longest {
    double gap_s, checkpoint_s;
  };
  algo::StopLatency l = algo::stop_latency();
  at::Tensor t = algo::pack(Longest{l.longest_gap_s, l.longest_checkpoint_s});
  world->all_reduce(t, dist::ReduceOp::kMax);
  const Longest worst = algo::unpack<Longest>(t);
  l.longest_gap_s = worst.gap_s;
  l.longest_checkpoint_s = worst.checkpoint_s;
  return l;
}

// The trace summary's lines on stopping: how long a stop could take, against the lead given.
std::string stop_latency_markdown(const algo::StopLatency& l, double lead_s) {
  std::string md = fmt::format(
      "\n## Stopping\n\nLongest stretch without a stop check: {:.1f} s; longest checkpoint: {:.1f} s; a stop "
      "could take up to {:.1f} s",
      l.longest_gap_s, l.longest_checkpoint_s, l.bound_s());
  if (lead_s <= 0) return md + " (no --stop-lead given to compare with).\n";
  return md + fmt::format(" against a lead of {:g} s (--stop-lead): {}.\n", lead_s,
                          l.bound_s() <= lead_s ? "within it" : "LONGER: a preempted job would be killed first");
}

void print_final_table(const std::vector<StageRow>& rows, const std::string& run_dir, const std::string& stopping) {
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
    std::ofstream(run_dir + "/trace/summary.md", std::ios::app) << stopping;
    std::string md = trace::format_markdown(summary) + stopping;
    std::printf("\ntime breakdown (trace/summary.md):\n%s\n", md.c_str());
  } catch (const std::exception& e) {
    spdlog::warn("trace summary not written: {}", e.what());
  }
  std::fflush(stdout);
}

// What a stage that ran out of memory is told: the sizes that decide its
// memory and how to shrink them (an allocator's own words name neither).
std::string batch_text(const config::SftStage& s, const std::string& path) {
  return path + ".batch = " + std::to_string(s.batch);
}
std::string batch_text(const config::RlStage& s, const std::string& path) {
  return path + ".prompts × group = " + std::to_string(s.prompts) + " × " + std::to_string(s.group);
}
std::string batch_text(const config::GrpoStage& s, const std::string& path) {
  return batch_text(static_cast<const config::RlStage&>(s), path);
}
std::string batch_text(const config::PpoStage& s, const std::string& path) {
  return batch_text(static_cast<const config::RlStage&>(s), path);
}
std::string batch_text(const config::DistillStage& s, const std::string& path) {
  return path + ".batch = " + std::to_string(s.batch);
}

std::string out_of_memory(const config::StageConfig& stage, int rank, const std::string& what) {
  const std::string batch = std::visit([&](const auto& s) { return batch_text(s, stage.path); }, stage.body);
  return stage.path + " ran out of memory on rank " + std::to_string(rank) + " (" + what + "): its batch (" + batch +
         " sequences per step) needs more than this machine has; lower it, or run it in pieces with " + stage.path +
         ".micro_batch or .micro_batch_tokens. `hpcrl plan PIPELINE --world N` estimates each role's memory per rank";
}

// Runs the stage of `env` inside its span; `seconds` is the span's duration.
algo::StageResult run_stage(algo::StageEnv& env, double& seconds) {
  trace::TimedSpan span(config::to_string(env.stage->kind()), {{"stage_index", double(env.stage_index)}});
  algo::StageResult result;
  try {
    result = std::visit(util::overloaded{[&](const config::SftStage&) { return algo::run_sft(env); },
                                         [&](const config::GrpoStage&) { return algo::run_grpo(env); },
                                         [&](const config::PpoStage&) { return algo::run_ppo(env); },
                                         [&](const config::DistillStage&) { return algo::run_distill(env); }},
                        env.stage->body);
  } catch (const std::bad_alloc&) {
    throw RuntimeError(out_of_memory(*env.stage, env.world->rank(), "std::bad_alloc"));
  } catch (const c10::Error& e) {
    if (!algo::is_out_of_memory(e)) throw;
    throw RuntimeError(out_of_memory(*env.stage, env.world->rank(), e.what_without_backtrace()));
  }
  seconds = span.elapsed_seconds();
  return result;
}

// One `hpcrl run`: the validated config, its inputs (datasets, tokenizers,
// the roles with their init weights) loaded and checked, then the run
// directory, and the stages run in order. Collective over the world from
// construction on.
// One `hpcrl run`; the stages find their roles and datasets through it (algo::StageInputs).
class PipelineRun : public algo::StageInputs {
 public:
  explicit PipelineRun(const RunOptions& options);
  int run();

  algo::Role& role(const std::string& name) override { return roles_->get(name); }
  algo::Role* rollout_role(const std::string& name) override { return roles_->rollout_of(name); }
  const algo::DataSplits& data(const std::string& name) override { return inputs_.data.at(name); }

 private:
  // The row of stage `index` when an earlier run completed it and its final
  // checkpoint `latest` is intact (its trained roles take their final
  // weights); nullopt when it still has to run.
  std::optional<StageRow> completed_before(size_t index, const std::string& sdir, const std::string& latest);
  // A stop signal before the first stage: nothing to checkpoint yet.
  int stop_before_first_step();
  // Runs stage `index` and records it complete; nullopt when it stopped on request (checkpoint written).
  std::optional<StageRow> run_stage_at(size_t index, const std::string& sdir, const std::string& latest);
  // After the last stage: the trace closed and rank 0's table of stages.
  int finish(const std::vector<StageRow>& rows);
  algo::StageEnv stage_env(size_t index, const std::string& sdir, const std::string& latest);
  // Rank 0 of a job on several nodes: `hpcrl plan`'s warnings for groups that span nodes, at the
  // launch's ranks per node.
  void warn_groups_across_nodes() const;
  // Removes stage `index`'s checkpoints (rank 0) so that it runs from its start.
  void forget_stage(size_t index, const std::string& sdir);
  StartCommand start_command() const;

  const RunOptions& options_;
  const dist::WorldInfo& w_;
  dist::CommPtr world_;
  config::PipelineConfig cfg_;
  std::string root_;  // the run directory
  int gpu_ = -1;
  RunInputs inputs_;
  std::unique_ptr<Roles> roles_;
  RunDirectory dir_;
  std::unique_ptr<trace::MetricsWriter> metrics_;
  std::unique_ptr<SpanDeviceTiming> span_timing_;  // run.device cuda: spans timed on the GPU
};

config::PipelineConfig load_config(const std::string& path, const std::vector<std::string>& overrides, int world) {
  config::ValidateOptions vo;
  vo.world = world;
  vo.require_weights = true;
  return config::load_pipeline_config(path, overrides, vo);
}

// The files a run reads: --force never replaces a directory that holds one of them.
std::vector<std::string> run_input_paths(const std::string& config_path, const config::PipelineConfig& cfg) {
  std::vector<std::string> paths{config_path};
  for (const auto& m : cfg.models) {
    if (m.init.kind == config::InitKind::path) paths.push_back(m.init.path);
    if (!m.tokenizer.empty() && m.tokenizer != "byte") paths.push_back(m.tokenizer);
  }
  for (const auto& d : cfg.data) {
    if (d.kind != config::DataKind::jsonl) continue;
    paths.push_back(d.jsonl.path);
    paths.push_back(d.jsonl.eval_path);
  }
  for (const auto& r : cfg.rewards)
    if (!r.command.empty()) paths.push_back(r.command.front());
  return paths;
}

// Rank 0, before anything is loaded: the run directory can be used as asked,
// and a resume continues the config it was started with (only keys that
// change nothing a checkpoint holds may differ). An error ends the job.
std::string checked_root(const RunOptions& options, const config::PipelineConfig& cfg, int rank, int world) {
  const std::string root = normalize_run_root(options.out.empty() ? cfg.run.out : options.out);
  if (rank != 0) return root;
  RunDirectory::check(root, options.mode, run_input_paths(options.config_path, cfg));
  if (options.mode != RunDirMode::kResume) return root;
  const std::string saved_path = root + "/config.resolved.yaml";
  config::ValidateOptions vo;
  vo.world = world;
  vo.require_weights = true;
  config::LoadResult saved = config::check_pipeline_config(saved_path, {}, vo);
  HPCRL_CHECK_INPUT(saved.ok(), "--resume: " << saved_path << " no longer loads ("
                                             << saved.diagnostics.errors.front().str()
                                             << "); restore the file, or start a new run with another --out DIR");
  const auto diffs = config::resume_differences(saved.config, cfg);
  if (diffs.empty()) return root;
  auto start = read_start_command(root);
  throw InputError("--resume: this config differs from the one " + root + " was started with (" + saved_path +
                   ") in " + config::describe(diffs) + "; a resumed run continues that config's steps, data and " +
                   "optimizer state, so only " + str::join(config::resume_safe_keys(), ", ") +
                   " may change. " +
                   (start ? "Resume with the command that started it: " + resume_command(*start)
                          : std::string("Resume with the pipeline file and --set flags it was started with")) +
                   ", or start a new run with another --out DIR");
}

// What the job was doing when it started (for an out-of-memory while it loads).
std::string g_loading = "starting";

RunInputs load_inputs(const config::PipelineConfig& cfg, const dist::WorldInfo& w) {
  g_loading = "checking the planned memory";
  check_memory_fits(cfg, w.size, w.rank, w.local_rank, w.local_size);
  g_loading = "reading the data (the data: section)";
  return load_run_inputs(cfg);
}

std::unique_ptr<Roles> build_roles(const config::PipelineConfig& cfg, const dist::WorldInfo& w, int gpu) {
  g_loading = "building the models (the models: section)";
  return std::make_unique<Roles>(cfg, w.rank, w.size,
                                 gpu < 0 ? at::Device(at::kCPU) : at::Device(at::kCUDA, static_cast<int8_t>(gpu)));
}

std::string out_of_memory_at_load(const std::string& what) {
  return "ran out of memory while " + g_loading + " on rank " + std::to_string(dist::world().rank) + " (" + what +
         "); `hpcrl plan PIPELINE --world N` estimates each role's memory per rank: use a smaller model or dataset, "
         "bf16, ZeRO, LoRA or more ranks";
}

PipelineRun::PipelineRun(const RunOptions& options)
    : options_(options),
      w_(dist::world()),
      world_(dist::world_comm()),
      cfg_(load_config(options.config_path, options.overrides, w_.size)),
      root_(checked_root(options, cfg_, w_.rank, w_.size)),
      // Before the run directory exists: a device this build or node cannot use is bad input.
      gpu_(dist::bind_device(cfg_.run.device)),
      // Every input is read and checked before the directory is touched: a data error
      // never leaves a half-made run behind, nor replaces a finished one (--force).
      inputs_(load_inputs(cfg_, w_)),
      roles_(build_roles(cfg_, w_, gpu_)),
      dir_(w_.rank == 0 ? RunDirectory::prepare(root_, options.mode, run_input_paths(options.config_path, cfg_),
                                                      config::to_yaml(cfg_), start_command())
                        : RunDirectory::attach(root_, options.mode == RunDirMode::kResume)) {
  world_->barrier();
  dist::start_watchdog(cfg_.run.comm_timeout_s);
  log::add_rank_file(dir_.logs_dir());
  // A resumed run continues its rank's trace file: the spans of the run it resumes stay
  // (their time was spent), and `trace summarize` counts each process's wall time apart.
  if (cfg_.trace.chrome) {
    trace::Options options;
    options.comm = cfg_.trace.comm;
    options.append = dir_.resumed();
    trace::start(dir_.trace_dir(), w_.rank, options);
    span_timing_ = std::make_unique<SpanDeviceTiming>(cfg_.run.device == config::Device::cuda);
  }
  install_stop_handlers(w_.rank);
  algo::set_stop_lead(options.stop_lead_s);
  // Past a file-size limit (ulimit -f) a write fails with EFBIG and a message naming the
  // file (io/safetensors_writer.cpp), instead of SIGXFSZ killing the rank mid-checkpoint.
  std::signal(SIGXFSZ, SIG_IGN);
  spdlog::info("run {} in {} on {} rank(s){}", cfg_.run.name, dir_.root(), w_.size, dir_.resumed() ? " (resuming)" : "");
  // Where the launcher put this rank (mpirun and srun must agree: tests/slurm/slurm_e2e.sh).
  spdlog::info("rank {} of {}: node {} of {}, local rank {} of {}, pid {}", w_.rank, w_.size, w_.node, w_.num_nodes,
               w_.local_rank, w_.local_size, static_cast<long>(::getpid()));
  spdlog::default_logger()->flush();  // in the rank's log file now, for whoever looks for this process
  warn_groups_across_nodes();
  if (cfg_.trace.metrics) metrics_ = std::make_unique<trace::MetricsWriter>(dir_.metrics_path(), w_.rank);
  if (cfg_.trace.tensorboard)  // validation requires metrics: the scalars mirror metrics.jsonl's lines
    metrics_->mirror_to_tensorboard(dir_.root() + "/tensorboard");
}

StartCommand PipelineRun::start_command() const {
  return StartCommand{options_.config_path, options_.overrides, root_, w_.size};
}

int PipelineRun::run() {
  if (stop_requested(world_)) return stop_before_first_step();
  std::vector<StageRow> rows;
  bool earlier_stage_ran = false;
  for (size_t i = 0; i < cfg_.stages.size(); ++i) {
    const auto& stage = cfg_.stages[i];
    const std::string sdir = dir_.checkpoints_dir() + "/" + stage_dir_name(int(i), stage);
    roles_->snapshot_for(stage);
    // A stage starts from the ones before it: once one of them has run in this process, what
    // a later stage completed before the resume came from other inputs, so it runs again.
    if (dir_.resumed() && earlier_stage_ran) forget_stage(i, sdir);
    const std::string latest = dir_.resumed() ? algo::resumable_checkpoint(sdir, world_) : "";
    if (auto done = completed_before(i, sdir, latest)) {
      rows.push_back(*done);
      continue;
    }
    earlier_stage_ran = true;
    // From a checkpoint, resume_stage drops the later lines once the checkpoint has
    // loaded, so that a resume it refuses leaves metrics.jsonl as it was.
    if (metrics_ && dir_.resumed() && latest.empty()) metrics_->truncate_after(int(i), -1);
    std::optional<StageRow> row = run_stage_at(i, sdir, latest);
    if (!row) return kExitResumable;
    rows.push_back(*row);
  }
  return finish(rows);
}

int PipelineRun::stop_before_first_step() {
  trace::stop();
  world_->barrier();
  spdlog::warn("{} arrived while the job was starting, before its first step: stopping with no new checkpoint; "
               "{} continues from {}. Continue with: {}",
               stop_signalled() ? stop_signal_name() : std::string("a stop signal"), dir_.root(),
               dir_.resumed() ? "its last checkpoint" : "the beginning (nothing to resume from yet)",
               resume_command(start_command()));
  return kExitResumable;
}

std::optional<StageRow> PipelineRun::run_stage_at(size_t i, const std::string& sdir, const std::string& latest) {
  const auto& stage = cfg_.stages[i];
  algo::StageEnv env = stage_env(i, sdir, latest);
  spdlog::info("stage {} ({}) starts", i, config::to_string(stage.kind()));
  StageRow row{stage_dir_name(int(i), stage), 0, stage.configured_steps()};
  reset_stage_memory_peaks(cfg_.run.device == config::Device::cuda);
  const algo::StageResult result = run_stage(env, row.seconds);
  // Collective; not for a stopped stage (agreed by every rank), so that a resumed run's
  // metrics.jsonl has the lines of an uninterrupted one: its resumed job writes them.
  if (!result.stopped) write_stage_memory_peaks(env, result.steps_done);
  row.accuracy = result.eval_accuracy;
  row.steps = result.steps_done;
  if (result.stopped) {
    trace::stop();
    if (stop_signalled())  // the ranks that got no signal of their own learnt of it from the others
      spdlog::warn("checkpoint written {:.1f} s after {} arrived", seconds_since_stop_signal(), stop_signal_name());
    // Every rank's checkpoint and trace are on disk before any rank exits: a launcher
    // ends the others as soon as one exits non-zero (mpirun, srun --kill-on-bad-exit).
    world_->barrier();
    spdlog::warn("stopped at step {} of stage {} on request; checkpoint written. Continue with: {}",
                 result.steps_done, i, resume_command(start_command()));
    return std::nullopt;
  }
  for (const auto& name : stage.trained_roles()) roles_->mark_initialised(name);
  if (w_.rank == 0)
    fs::write_file_atomic(sdir + "/complete.json",
                          nlohmann::json{{"steps", result.steps_done}, {"eval_accuracy", result.eval_accuracy},
                                         {"eval_loss", result.eval_loss}, {"seconds", row.seconds}}
                              .dump(1));
  return row;
}

int PipelineRun::finish(const std::vector<StageRow>& rows) {
  const std::string stopping = stop_latency_markdown(worst_stop_latency(world_), options_.stop_lead_s);
  world_->barrier();
  trace::stop();
  world_->barrier();
  if (w_.rank == 0) print_final_table(rows, dir_.root(), stopping);
  return kExitOk;
}

std::optional<StageRow> PipelineRun::completed_before(size_t index, const std::string& sdir,
                                                      const std::string& latest) {
  if (!dir_.resumed() || !stdfs::exists(sdir + "/complete.json")) return std::nullopt;
  const auto& stage = cfg_.stages[index];
  const std::string done_path = sdir + "/complete.json";
  const io::StageRecord done = io::parse_stage_record(fs::read_file(done_path, "stage record"), done_path);
  const int64_t steps = done.steps;
  // The final checkpoint was damaged and an older one chosen: the stage continues from there.
  if (latest.empty() || algo::checkpoint_step(latest) != steps) {
    spdlog::warn("stage {} had completed, but its final checkpoint is not intact; it continues from {}", index,
                 latest.empty() ? std::string("its start") : latest);
    return std::nullopt;
  }
  for (const auto& name : stage.trained_roles()) {
    auto& r = roles_->get(name);
    if (r.member()) algo::load_saved_model(latest, r);
  }
  StageRow row{stage_dir_name(int(index), stage), steps, stage.configured_steps()};
  row.accuracy = done.eval_accuracy;
  row.skipped = true;
  return row;
}

void PipelineRun::warn_groups_across_nodes() const {
  if (w_.rank != 0 || w_.num_nodes <= 1) return;
  // The launch's own layout: local_size ranks a node, in blocks (as srun and mpirun place them by default).
  for (const auto& w : dist::make_plan(cfg_, w_.size, w_.local_size).warnings)
    if (w.find("span nodes") != std::string::npos) spdlog::warn("{}", w);
}

void PipelineRun::forget_stage(size_t index, const std::string& sdir) {
  std::error_code ec;
  if (w_.rank == 0 && stdfs::exists(sdir, ec)) {
    spdlog::warn("stage {} ({}) had run before this resume, but an earlier stage has just run again, so it starts "
                 "over from that stage's result: its checkpoints ({}) are removed and its metrics lines replaced",
                 index, config::to_string(cfg_.stages[index].kind()), sdir);
    stdfs::remove_all(sdir, ec);  // hpcrl's own checkpoints/NN-kind folder
  }
  world_->barrier();
}

algo::StageEnv PipelineRun::stage_env(size_t index, const std::string& sdir, const std::string& latest) {
  algo::StageEnv env;
  env.pipeline = &cfg_;
  env.stage = &cfg_.stages[index];
  env.stage_index = int(index);
  env.world = world_;
  env.metrics = metrics_.get();
  env.inputs = this;
  env.should_stop = [this] { return stop_requested(world_); };
  env.stop_signalled = [] { return stop_signalled(); };
  env.checkpoint_dir = sdir;
  env.checkpoint_every = cfg_.run.checkpoint_every;
  env.keep_last = cfg_.run.keep_last;
  if (!latest.empty()) env.resume_from = latest;
  return env;
}

}  // namespace

int run_pipeline(const RunOptions& options) {
  std::unique_ptr<PipelineRun> run;
  try {
    run = std::make_unique<PipelineRun>(options);
  } catch (const std::bad_alloc&) {
    throw RuntimeError(out_of_memory_at_load("std::bad_alloc"));
  } catch (const c10::Error& e) {
    if (!algo::is_out_of_memory(e)) throw;
    throw RuntimeError(out_of_memory_at_load(e.what_without_backtrace()));
  }
  return run->run();
}

}  // namespace hpcrl::runner
