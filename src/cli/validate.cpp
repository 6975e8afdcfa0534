// `hpcrl validate PIPELINE.yaml [--world N] [--set k=v]...`: load and check a
// pipeline exactly as `run` would (schema, references, stage wiring, layouts
// against --world, architectures from presets or config.json) without
// touching a GPU, a rank or the run directory. Prints a short summary, or
// every error as file:line:col: key.path: message; fix — and exits 2.
// Then it reads every other input as `run` would before creating anything:
// each dataset a stage draws from (every row, and every row's length against
// the models' context), the tokenizers, and the safetensors headers of init
// weights (a truncated file is found; `run` also checks every tensor's shape).
// Missing weights or tokenizer.json are only a warning here (the layout can
// be checked from config.json alone); `run` treats them as errors.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "hpcrl/config/loader.h"
#include "hpcrl/config/render.h"
#include "hpcrl/cost/eval_work.h"
#include "hpcrl/runner/run_inputs.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/strings.h"

namespace {

struct ValidateArgs {
  std::string file;
  long long world = 0;
  std::vector<std::string> sets;
};

int run_validate(const ValidateArgs& a) {
  using namespace hpcrl::config;
  ValidateOptions opt;
  opt.world = a.world;
  LoadResult res = check_pipeline_config(a.file, a.sets, opt);
  for (const auto& w : res.diagnostics.warnings) std::fprintf(stderr, "warning: %s\n", hpcrl::str::show_nul(w.str()).c_str());
  if (!res.ok()) {
    for (const auto& e : res.diagnostics.errors) std::fprintf(stderr, "error: %s\n", hpcrl::str::show_nul(e.str()).c_str());
    size_t n = res.diagnostics.errors.size();
    std::fprintf(stderr, "%zu error%s in %s\n", n, n == 1 ? "" : "s", a.file.c_str());
    return hpcrl::kExitBadInput;
  }
  {
    // What the inputs say is for a run's log; validate reports only warnings and errors.
    const auto level = spdlog::get_level();
    spdlog::set_level(std::max(level, spdlog::level::warn));
    hpcrl::runner::load_run_inputs(res.config, /*lengths_optional=*/true);
    hpcrl::runner::check_weight_files(res.config);
    spdlog::set_level(level);
  }
  std::fputs(summarize(res.config, opt).c_str(), stdout);
  for (const auto& stage : res.config.stages) {
    const std::string note = hpcrl::cost::eval_note(stage, hpcrl::cost::eval_work(res.config, stage));
    if (!note.empty()) std::printf("note: %s\n", note.c_str());
  }
  return hpcrl::kExitOk;
}

hpcrl::cli::Registration reg{"validate", 20, [](CLI::App& app) {
  auto args = std::make_shared<ValidateArgs>();
  auto* sub = app.add_subcommand("validate", "Check a pipeline file (schema, references, layouts) without running it");
  sub->add_option("pipeline", args->file, "Pipeline YAML file")->required();
  sub->add_option("--world", args->world, "Ranks the job will run with; 0 skips the checks that need it")
      ->check(hpcrl::cli::world_size_check(0))
      ->capture_default_str();
  sub->add_option("--set", args->sets, "Override a key: --set a.b.c=value (repeatable; value is YAML)")
      ->allow_extra_args(false);
  return [args] { return run_validate(*args); };
}};

}  // namespace
