// Rows of the placement benchmark (bench_placement.sh) from a finished run:
// the GRPO iteration time, samples/s, the generating and training halves of an
// iteration, each role's idle shares and the learning curve's end.
//
// From RUN/metrics.jsonl, per measured iteration (the first `--skip` are warm-up):
//   seconds/iteration        colocated: the iteration; disaggregated: the
//                            trainer's time from one update's end to the next
//   G = seconds/rollout + seconds/reward                       (generation)
//   T = seconds/old_logprob + ref_logprob + actor_update       (training)
// samples/s = prompts·group / iteration. From RUN/trace/summary.json (written by
// `hpcrl trace summarize RUN --json`): the roles table's busy and waiting shares.
// The curve: the last eval/accuracy of the stage and reward/mean over its last 10 iterations.
// With --curve instead: one row of the whole learning curve, every held-out
// evaluation (step: accuracy) and the mean reward of each 10 iterations.
//   bench_placement_report RUN_DIR --label NAME --samples N [--skip K] | --header
//   bench_placement_report RUN_DIR --label NAME --curve | --curve-header
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "../train/run_metrics.h"

namespace {
double value(const nlohmann::json& j, const char* key) { return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0; }

// "gen 61 % busy, 39 % weights; trainer 48 % busy, 52 % data" from the summary's roles table ("-" without one).
std::string idle_cell(const std::string& run_dir) {
  std::ifstream in(run_dir + "/trace/summary.json");
  if (!in) return "-";
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.contains("roles") || j["roles"].empty()) return "-";
  std::string out;
  for (const auto& r : j["roles"]) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s %.0f %% busy, %.0f %% data, %.0f %% weights", out.empty() ? "" : "; ",
                  r["role"].get<std::string>().c_str(), 100 * r["busy"].get<double>(),
                  100 * r["waiting_data"].get<double>(), 100 * r["waiting_weights"].get<double>());
    out += buf;
  }
  return out;
}

// "| label | 0: 41.0, 10: 44.5, ... | 0.412, 0.430, ... |" (accuracy in %, reward/mean per 10 iterations).
int print_curve(const std::string& run_dir, const std::string& label) {
  std::string evals, rewards;
  for (const auto& j : bench::stage_steps(run_dir, "grpo", "eval/accuracy", 0)) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%s%lld: %.1f", evals.empty() ? "" : ", ", j["step"].get<long long>(),
                  100 * value(j, "eval/accuracy"));
    evals += buf;
  }
  const auto all = bench::stage_steps(run_dir, "grpo", "reward/mean", 0);
  for (size_t first = 0; first < all.size(); first += 10) {
    double sum = 0;
    const size_t last = std::min(all.size(), first + 10);
    for (size_t i = first; i < last; ++i) sum += value(all[i], "reward/mean");
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.3f", rewards.empty() ? "" : ", ", sum / double(last - first));
    rewards += buf;
  }
  std::printf("| %s | %s | %s |\n", label.c_str(), evals.c_str(), rewards.c_str());
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  std::string run_dir, label;
  bool curve = false;
  double samples = 0;
  int skip = 1;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (!std::strcmp(argv[i], "--header")) {
      std::printf("| run | iterations | iteration s | samples/s | G s | T s | idle (trace) | last eval accuracy "
                  "| reward/mean, last 10 |\n|---|--:|--:|--:|--:|--:|---|--:|--:|\n");
      return 0;
    }
    if (!std::strcmp(argv[i], "--curve-header")) {
      std::printf("| run | held-out accuracy %% (step: value) | reward/mean, per 10 iterations |\n|---|---|---|\n");
      return 0;
    }
    if (!std::strcmp(argv[i], "--curve")) curve = true;
    else if (!std::strcmp(argv[i], "--label")) label = next();
    else if (!std::strcmp(argv[i], "--samples")) samples = std::stod(next());
    else if (!std::strcmp(argv[i], "--skip")) skip = std::stoi(next());
    else if (argv[i][0] != '-' && run_dir.empty()) run_dir = argv[i];
    else return std::fprintf(stderr, "bench_placement_report: unknown argument '%s'\n", argv[i]), 2;
  }
  if (curve && !run_dir.empty()) {
    try {
      return print_curve(run_dir, label);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_placement_report: %s\n", e.what());
      return 1;
    }
  }
  if (run_dir.empty() || samples <= 0)
    return std::fprintf(stderr, "usage: bench_placement_report RUN_DIR --label NAME --samples N [--skip K] | --header\n"), 2;
  try {
    const auto steps = bench::stage_steps(run_dir, "grpo", "seconds/iteration", skip);
    const auto all = bench::stage_steps(run_dir, "grpo", "reward/mean", 0);
    const auto evals = bench::stage_steps(run_dir, "grpo", "eval/accuracy", 0);
    double iter = 0, gen = 0, train = 0, reward = 0;
    for (const auto& j : steps) {
      iter += value(j, "seconds/iteration");
      gen += value(j, "seconds/rollout") + value(j, "seconds/reward");
      train += value(j, "seconds/old_logprob") + value(j, "seconds/ref_logprob") + value(j, "seconds/actor_update");
    }
    const size_t tail = std::min<size_t>(10, all.size());
    for (size_t i = all.size() - tail; i < all.size(); ++i) reward += value(all[i], "reward/mean");
    const double n = std::max<double>(1, double(steps.size()));
    const double acc = evals.empty() ? -1 : value(evals.back(), "eval/accuracy");
    char acc_cell[32] = "-";
    if (acc >= 0) std::snprintf(acc_cell, sizeof acc_cell, "%.1f %%", 100 * acc);
    std::printf("| %s | %zu | %.3f | %.1f | %.3f | %.3f | %s | %s | %.3f |\n", label.c_str(), all.size(), iter / n,
                samples * n / std::max(1e-9, iter), gen / n, train / n, idle_cell(run_dir).c_str(), acc_cell,
                reward / std::max<double>(1, double(tail)));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_placement_report: %s\n", e.what());
    return 1;
  }
  return 0;
}
