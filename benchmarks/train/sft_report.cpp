// One row of the SFT benchmark table (bench_sft.sh) from a finished run:
// tokens/s from RUN/metrics.jsonl, MFU against the GEMM throughput bench_gemm
// measured around the run, and the gradient synchronisation's share of a step
// from the ranks' Chrome traces.
//
// The run trains on generated rows of one fixed length (--seq tokens, of which
// --response-tokens carry the loss), so a step processes exactly batch·seq
// tokens; the tool checks that against the loss-token count the trainer logged.
//
// Gradient sync, per rank over the measured steps (trace spans of
// src/algo/stages/sft_stage.cpp and train_step.cpp, comm events of the communicator):
//   all-reduce time   the `all_reduce` comm events (comm lane) that start inside
//                     `sft/forward_backward` or `sft/grad_sync`: the gradient buckets
//   hidden            the part of those events inside `sft/forward_backward`
//                     (running beside the backward pass)
//   exposed           `sft/grad_sync`: the main thread waiting for the buckets and
//                     copying the averaged gradients back
// each divided by the rank's summed `sft/step` time, then averaged over ranks.
//   bench_sft_report RUN_DIR --preset P --seq T --response-tokens R --batch B --dp D --threads N
//       --gemm BEFORE AFTER --gemm-shape BEFORE AFTER [--skip K] [--label NAME] [--header]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "hpcrl/trace/reader.h"
#include "run_metrics.h"

namespace {

struct Interval {
  double begin, end;
};

double overlap(const Interval& a, const Interval& b) {
  return std::max(0.0, std::min(a.end, b.end) - std::max(a.begin, b.begin));
}

bool inside(double t, const std::vector<Interval>& spans) {
  for (const auto& s : spans)
    if (t >= s.begin && t < s.end) return true;
  return false;
}

double arg(const hpcrl::trace::Event& e, const std::string& key) {
  for (const auto& [k, v] : e.args)
    if (k == key) return v;
  return -1;
}

struct SyncShares {
  double comm = 0, hidden = 0, exposed = 0;  // fractions of step time, mean over ranks
  int ranks = 0;
};

// Gradient-sync shares of the steps numbered ≥ `first_step` (0-based, as in the span args).
SyncShares sync_shares(const std::string& run_dir, int first_step) {
  SyncShares out;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir + "/trace")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || entry.path().extension() != ".json") continue;
    auto file = hpcrl::trace::read_trace_file(entry.path().string());
    std::vector<Interval> steps, fwd_bwd, sync;
    for (const auto& e : file.events) {
      Interval iv{e.ts_us, e.ts_us + e.dur_us};
      if (e.name == "sft/step" && arg(e, "step") >= first_step) steps.push_back(iv);
    }
    for (const auto& e : file.events) {
      Interval iv{e.ts_us, e.ts_us + e.dur_us};
      if (!inside(e.ts_us, steps)) continue;
      if (e.name == "sft/forward_backward") fwd_bwd.push_back(iv);
      if (e.name == "sft/grad_sync") sync.push_back(iv);
    }
    double step_us = 0, comm_us = 0, hidden_us = 0, exposed_us = 0;
    for (const auto& s : steps) step_us += s.end - s.begin;
    for (const auto& s : sync) exposed_us += s.end - s.begin;
    for (const auto& e : file.events) {
      if (e.cat != "comm" || e.name != "all_reduce") continue;
      if (!inside(e.ts_us, fwd_bwd) && !inside(e.ts_us, sync)) continue;
      Interval iv{e.ts_us, e.ts_us + e.dur_us};
      comm_us += e.dur_us;
      for (const auto& f : fwd_bwd) hidden_us += overlap(iv, f);
    }
    if (step_us <= 0) continue;
    out.comm += comm_us / step_us;
    out.hidden += hidden_us / step_us;
    out.exposed += exposed_us / step_us;
    ++out.ranks;
  }
  if (out.ranks == 0) throw std::runtime_error(run_dir + "/trace: no rank file with measured sft/step spans");
  out.comm /= out.ranks;
  out.hidden /= out.ranks;
  out.exposed /= out.ranks;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string run_dir, preset, label;
  double seq = 0, response = 0, batch = 0, gemm[2] = {0, 0}, shape[2] = {0, 0};
  int dp = 1, threads = 1, skip = 1;
  bool header = false;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (!std::strcmp(argv[i], "--header")) header = true;
    else if (!std::strcmp(argv[i], "--preset")) preset = next();
    else if (!std::strcmp(argv[i], "--label")) label = next();
    else if (!std::strcmp(argv[i], "--seq")) seq = std::stod(next());
    else if (!std::strcmp(argv[i], "--response-tokens")) response = std::stod(next());
    else if (!std::strcmp(argv[i], "--batch")) batch = std::stod(next());
    else if (!std::strcmp(argv[i], "--dp")) dp = std::stoi(next());
    else if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(next());
    else if (!std::strcmp(argv[i], "--skip")) skip = std::stoi(next());
    else if (!std::strcmp(argv[i], "--gemm")) gemm[0] = std::stod(next()), gemm[1] = std::stod(next());
    else if (!std::strcmp(argv[i], "--gemm-shape")) shape[0] = std::stod(next()), shape[1] = std::stod(next());
    else if (argv[i][0] != '-' && run_dir.empty()) run_dir = argv[i];
    else {
      std::fprintf(stderr, "bench_sft_report: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (header) {
    std::printf("| config | dp × threads | step s | tokens/s | loss tokens/s | model GFLOP/s | GEMM GFLOP/s 1024³ (before/after) "
                "| **MFU** | GEMM GFLOP/s model shape | MFU vs shape | grad all-reduce / step | hidden / step "
                "| exposed sync / step |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    return 0;
  }
  if (run_dir.empty() || preset.empty() || seq <= 0 || response <= 0 || batch <= 0 || gemm[0] <= 0 || gemm[1] <= 0) {
    std::fprintf(stderr, "usage: bench_sft_report RUN_DIR --preset P --seq T --response-tokens R --batch B --dp D --threads N "
                         "--gemm BEFORE AFTER [--gemm-shape BEFORE AFTER] [--skip K] [--label NAME] | --header\n");
    return 2;
  }
  try {
    const hpcrl::ModelArch arch = hpcrl::model_arch_preset(preset);
    double seconds = 0, loss_tokens = 0;
    int steps = 0;
    for (const auto& j : bench::stage_steps(run_dir, "sft", "seconds/step", skip)) {
      const double s = j["seconds/step"].get<double>();
      const double tok = j["tokens_per_s"].get<double>() * s;  // the step's global loss tokens
      if (std::abs(tok - batch * response) > 0.5)
        throw std::runtime_error(run_dir + "/metrics.jsonl step " + std::to_string(j["step"].get<int>()) + ": " +
                                 std::to_string(tok) + " loss tokens, expected batch·response = " +
                                 std::to_string(batch * response) + " (the generated rows are not the assumed length)");
      seconds += s;
      loss_tokens += tok;
      ++steps;
    }
    const double step_s = seconds / steps;
    const double tokens_per_s = batch * seq / step_s;
    const double model_flops = tokens_per_s * bench::training_flops_per_token(arch, seq);
    const double g = 0.5 * (gemm[0] + gemm[1]), gs = 0.5 * (shape[0] + shape[1]);
    SyncShares sync = sync_shares(run_dir, skip);
    std::printf("| %s (%.1fM), batch %.0f × %.0f | %d × %d | %.3f | %.0f | %.0f | %.2f | %.1f (%.1f / %.1f) | **%.1f%%** "
                "| %s | %s | %.1f%% | %.1f%% | %.1f%% |\n",
                label.empty() ? preset.c_str() : label.c_str(), arch.num_parameters() / 1e6, batch, seq, dp, threads, step_s,
                tokens_per_s, loss_tokens / seconds, model_flops / 1e9, g / 1e9, gemm[0] / 1e9, gemm[1] / 1e9,
                100.0 * model_flops / g, gs > 0 ? std::to_string(int(std::lround(gs / 1e9))).c_str() : "—",
                gs > 0 ? (std::to_string(int(std::lround(100.0 * model_flops / gs))) + "%").c_str() : "—",
                100.0 * sync.comm, 100.0 * sync.hidden, 100.0 * sync.exposed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_sft_report: %s\n", e.what());
    return 1;
  }
  return 0;
}
