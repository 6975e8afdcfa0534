// `hpcrl plan PIPELINE.yaml --world N [--gpus-per-node G] [--json] [--set k=v]
//  [--estimate --hardware PROFILE [--prompt-len S] [--response-len T] [--sequence-len L] [--from-run DIR]
//   [--decode-graphs] [--partial-rollouts] [--tool-calls C] [--tool-seconds S] [--tool-reply-len R]]`:
// the rank map a run would use — every role's mesh, each rank's node and local
// device, every group's members, warnings for tp/sp groups that cross nodes,
// and a per-rank memory estimate; with --estimate, the predicted seconds of
// every stage's spans on the profile's hardware (cost/stage_estimate.h).
// Pure computation: no launcher, no MPI. The pipeline is validated first,
// exactly as `validate --world N` does.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "hpcrl/config/loader.h"
#include "hpcrl/cost/stage_estimate.h"
#include "hpcrl/distributed/plan.h"
#include "hpcrl/util/error.h"

namespace {

struct PlanArgs {
  std::string file;
  long long world = 0;
  long long gpus_per_node = 4;
  bool json = false;
  std::vector<std::string> sets;
  bool estimate = false, gpus_per_node_given = false;
  std::string hardware, from_run;
  hpcrl::cost::Shapes shapes;
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
  cost::HardwareProfile hw;
  std::vector<cost::StageEstimate> estimates;
  if (a.estimate) {
    hw = cost::load_profile(a.hardware);
    if (a.gpus_per_node_given) hw.gpus_per_node = static_cast<int>(a.gpus_per_node);
    const auto measured = a.from_run.empty() ? std::map<int, cost::Shapes>{} : cost::measured_shapes(a.from_run, res.config);
    estimates = cost::estimate_pipeline(res.config, a.world, hw, a.shapes, measured);
  }
  const int per_node = a.estimate && !a.gpus_per_node_given ? hw.gpus_per_node : static_cast<int>(a.gpus_per_node);
  dist::Plan plan = dist::make_plan(res.config, static_cast<int>(a.world), per_node);
  const std::vector<dist::RankMemory> peaks = dist::rank_memory(plan);
  if (a.json) {
    nlohmann::json j = dist::plan_json(plan);
    if (a.estimate) {
      j["estimate"] = cost::estimate_json(estimates, hw);
      j["estimate"]["memory"] = nlohmann::json::array();
      for (const auto& m : peaks)
        j["estimate"]["memory"].push_back({{"ranks", m.ranks}, {"peak", m.peak()}, {"capacity", hw.memory_capacity},
                                           {"fits", double(m.peak()) <= hw.memory_capacity}});
    }
    std::printf("%s\n", j.dump().c_str());  // one line: thousands of ranks stay greppable
  } else {
    std::fputs(dist::plan_text(plan).c_str(), stdout);
    if (a.estimate) {
      std::fputs(("\n" + cost::estimate_text(estimates, hw)).c_str(), stdout);
      for (const auto& m : peaks)
        std::printf("memory: ranks %d-%d peak %.3g GB of %s's %.3g GB per device%s\n", m.ranks.front(), m.ranks.back(),
                    double(m.peak()) / 1e9, hw.name.c_str(), hw.memory_capacity / 1e9,
                    double(m.peak()) <= hw.memory_capacity ? "" : ": DOES NOT FIT");
    }
  }
  return kExitOk;
}

hpcrl::cli::Registration reg{"plan", 25, [](CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* sub = app.add_subcommand("plan", "Show the rank map, groups and memory estimate of a pipeline for N ranks");
  sub->add_option("pipeline", args->file, "Pipeline YAML file")->required();
  sub->add_option("--world", args->world, "Ranks the job will run with")->required()->check(hpcrl::cli::world_size_check(1));
  sub->add_option("--gpus-per-node", args->gpus_per_node, "Devices (ranks) per node")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_flag("--json", args->json, "Print one JSON document on stdout (its shape: docs/communication.md)");
  sub->add_option("--set", args->sets, "Override a key: --set a.b.c=value (repeatable; value is YAML)")
      ->allow_extra_args(false);
  auto* est = sub->add_flag("--estimate", args->estimate, "Predict each stage's seconds per step/iteration, span by span");
  sub->add_option("--hardware", args->hardware, "Hardware profile: a shipped name (a100-40gb, h100-sxm, ...) or a "
                                                "YAML file from `hpcrl calibrate`")->needs(est);
  est->needs(sub->get_option("--hardware"));
  sub->add_option("--prompt-len", args->shapes.prompt, "Mean prompt tokens (RL; default: --from-run, else 64)")
      ->check(CLI::PositiveNumber)->needs(est);
  sub->add_option("--response-len", args->shapes.response,
                  "Mean response tokens (RL; default: --from-run, else max_new_tokens)")->check(CLI::PositiveNumber)->needs(est);
  sub->add_option("--sequence-len", args->shapes.sequence,
                  "Mean tokens per SFT/distillation sequence (default: --from-run, else 256)")->check(CLI::PositiveNumber)->needs(est);
  sub->add_flag("--decode-graphs", args->shapes.engine.decode_graphs,
                "Cost each decode step as one replayed CUDA graph, as vLLM and SGLang run it by default (a "
                "published run's engine, or hpcrl with rollout.decode_step: graphs; not set from the config)")->needs(est);
  sub->add_flag("--partial-rollouts", args->shapes.engine.partial_rollouts,
                "Finish responses still running at a weight sync in the next iteration, so the longest do not "
                "decode alone at the end (veRL's partial_rollout; a stage with async.partial_rollouts: true is "
                "costed so without the flag)")->needs(est);
  sub->add_option("--tool-calls", args->shapes.tools.calls,
                  "Tool calls per response of a stage with tools (default: --from-run, else its tools.max_turns)")
      ->check(CLI::PositiveNumber)->needs(est);
  sub->add_option("--tool-seconds", args->shapes.tools.seconds,
                  "Seconds per tool call (default: --from-run, else 0, as for the calculator)")
      ->check(CLI::NonNegativeNumber)->needs(est);
  sub->add_option("--tool-reply-len", args->shapes.tools.reply_tokens,
                  "Tokens per tool reply (default: --from-run, else the stage's tools.reply_tokens)")
      ->check(CLI::PositiveNumber)->needs(est);
  sub->add_option("--from-run", args->from_run, "Take the mean lengths a finished run measured (its metrics.jsonl)")
      ->needs(est);
  return [args, sub] {
    args->gpus_per_node_given = sub->count("--gpus-per-node") > 0;
    return run_plan(*args);
  };
}};

}  // namespace
