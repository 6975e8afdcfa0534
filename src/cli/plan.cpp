// `hpcrl plan PIPELINE.yaml --world N [--gpus-per-node G] [--json] [--set k=v]`:
// the rank map a run would use — every role's mesh, each rank's node and local
// device, every group's members, warnings for tp/sp groups that cross nodes,
// and a per-rank memory estimate. Pure computation: no launcher, no MPI.
// The pipeline is validated first, exactly as `validate --world N` does.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "hpcrl/config/loader.h"
#include "hpcrl/dist/plan.h"
#include "hpcrl/util/error.h"

namespace {

struct PlanArgs {
  std::string file;
  long long world = 0;
  long long gpus_per_node = 4;
  bool json = false;
  std::vector<std::string> sets;
};

int run_plan(const PlanArgs& a) {
  using namespace hpcrl;
  config::ValidateOptions opt;
  opt.world = a.world;
  config::LoadResult res = config::check_pipeline_config(a.file, a.sets, opt);
  for (const auto& w : res.diagnostics.warnings) std::fprintf(stderr, "warning: %s\n", w.str().c_str());
  if (!res.ok()) {
    for (const auto& e : res.diagnostics.errors) std::fprintf(stderr, "error: %s\n", e.str().c_str());
    size_t n = res.diagnostics.errors.size();
    std::fprintf(stderr, "%zu error%s in %s\n", n, n == 1 ? "" : "s", a.file.c_str());
    return kExitBadInput;
  }
  dist::Plan plan = dist::make_plan(res.config, static_cast<int>(a.world), static_cast<int>(a.gpus_per_node));
  if (a.json) {
    std::printf("%s\n", dist::plan_json(plan).dump().c_str());  // one line: thousands of ranks stay greppable
  } else {
    std::fputs(dist::plan_text(plan).c_str(), stdout);
  }
  return kExitOk;
}

hpcrl::cli::Registration reg{"plan", 25, [](CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* sub = app.add_subcommand("plan", "Show the rank map, groups and memory estimate of a pipeline for N ranks");
  sub->add_option("pipeline", args->file, "Pipeline YAML file")->required();
  sub->add_option("--world", args->world, "Ranks the job will run with")->required()->check(CLI::PositiveNumber);
  sub->add_option("--gpus-per-node", args->gpus_per_node, "Devices (ranks) per node")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_flag("--json", args->json, "Print one JSON document (DESIGN §10) on stdout");
  sub->add_option("--set", args->sets, "Override a key: --set a.b.c=value (repeatable; value is YAML)")
      ->allow_extra_args(false);
  return [args] { return run_plan(*args); };
}};

}  // namespace
