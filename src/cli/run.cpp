// `hpcrl run PIPELINE.yaml [--set k=v]... [--out DIR] [--resume | --force]`:
// run a pipeline under whatever launched us (plain, mpirun, srun). Any rank's
// failure ends the whole job (exit 2 bad input, 1 runtime); a preempted run
// exits 75 after its checkpoint. With HPCRL_EXIT_CODE_FILE set, rank 0 also
// writes the exit code there when the run ends (not when it fails).
#include <cstdlib>
#include <memory>
#include <string>

#include "cli/command.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/runner/pipeline_runner.h"
#include "hpcrl/runner/preemption.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/log.h"

namespace {

struct RunArgs {
  hpcrl::runner::RunOptions options;
  bool resume = false, force = false;
};

hpcrl::cli::Registration reg{"run", 10, [](CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* sub = app.add_subcommand("run", "Run a pipeline (SFT -> GRPO/PPO -> distillation) into its run directory");
  sub->add_option("pipeline", args->options.config_path, "Pipeline YAML file")->required();
  sub->add_option("--set", args->options.overrides, "Override a key: --set a.b.c=value (repeatable; value is YAML)")
      ->allow_extra_args(false);
  auto* out = sub->add_option("--out", args->options.out, "Run directory (default: run.out, i.e. runs/<name>)");
  auto* resume = sub->add_flag("--resume", args->resume, "Continue the run in the run directory from its last checkpoint");
  auto* force = sub->add_flag("--force", args->force, "Replace an existing run directory");
  sub->add_option("--stop-lead", args->options.stop_lead_s,
                  "Seconds the scheduler gives between its stop signal and the kill (sbatch --signal=USR1@SECONDS): "
                  "warns when a stop could take longer")
      ->check(CLI::NonNegativeNumber);
  resume->excludes(force);
  return [args, out] {
    // First of all: a stop signal that arrives while MPI starts or the inputs load must not
    // kill the job (a batch script requeues only on exit 75).
    hpcrl::runner::install_stop_handlers(hpcrl::runner::launcher_rank());
    return hpcrl::dist::run_or_abort([&] {
      if (out->count() > 0 && args->options.out.empty())
        throw hpcrl::InputError("--out \"\" names no directory; give one, e.g. --out runs/NAME, or leave --out out "
                                "for run.out");
      const auto& w = hpcrl::dist::init(nullptr, nullptr);
      hpcrl::log::init(w.rank, w.size, hpcrl::cli::global_options().log_level);
      args->options.mode = args->resume  ? hpcrl::runner::RunDirMode::kResume
                           : args->force ? hpcrl::runner::RunDirMode::kForce
                                         : hpcrl::runner::RunDirMode::kFresh;
      int rc = hpcrl::runner::run_pipeline(args->options);
      // For a launcher wrapper (slurm/local-mpirun.sh): SIGTERM sent to mpirun itself makes
      // mpirun exit 1 whatever its ranks return, so the job's own verdict is written here.
      if (const char* path = std::getenv("HPCRL_EXIT_CODE_FILE"); path && *path && w.rank == 0)
        hpcrl::fs::write_file_atomic(path, std::to_string(rc) + "\n");
      hpcrl::dist::finalize();
      return rc;
    });
  };
}};

}  // namespace
