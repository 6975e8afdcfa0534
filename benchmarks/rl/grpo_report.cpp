// Rows of the GRPO benchmark tables (bench_grpo.sh) from a finished run: where
// an iteration's time goes and how fast each stage turns tokens over.
//
// From RUN/metrics.jsonl, per measured iteration (the first `--skip` are warm-up):
//   seconds/iteration                  the whole iteration (the baseline of the shares)
//   seconds/{rollout, reward, old_logprob, ref_logprob, actor_update}
//                                      the stages (each phase's trace span);
//                                      old_logprob only with recompute_old_logprobs
//   other = iteration − the stages     advantages, metric reductions
//   tokens_per_s · seconds/iteration   every sample's prompt + response tokens
//   response_len/mean · prompts·group  the generated tokens
// Rates: rollout = generated tokens / s; the log-prob passes and the update =
// prompt + response tokens / s. MFU of a stage = its model FLOP/s (run_metrics.h:
// forward 2·N + 4·L·T·H·D per token, update 3× that per epoch, T = mean sample
// length; generation counts each prompt and generated token once) over the fp32
// GEMM FLOP/s bench_gemm measured before and after the run, same threads.
// Weight sync is not a stage here: colocated roles generate with the training
// weights themselves (disaggregated runs would add seconds/weight_sync).
//   bench_grpo_report RUN_DIR --table shares|rates --preset P --prompts N --group G
//       --gemm BEFORE AFTER [--epochs E] [--skip K] [--label NAME] [--header]
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "../train/run_metrics.h"

namespace {

const char* const kStages[] = {"rollout", "reward", "old_logprob", "ref_logprob", "actor_update"};

std::string pct(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * part / whole);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  std::string run_dir, table, preset, label;
  double prompts = 0, group = 0, epochs = 1, gemm[2] = {0, 0};
  int skip = 1;
  bool header = false;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (!std::strcmp(argv[i], "--header")) header = true;
    else if (!std::strcmp(argv[i], "--table")) table = next();
    else if (!std::strcmp(argv[i], "--preset")) preset = next();
    else if (!std::strcmp(argv[i], "--label")) label = next();
    else if (!std::strcmp(argv[i], "--prompts")) prompts = std::stod(next());
    else if (!std::strcmp(argv[i], "--group")) group = std::stod(next());
    else if (!std::strcmp(argv[i], "--epochs")) epochs = std::stod(next());
    else if (!std::strcmp(argv[i], "--skip")) skip = std::stoi(next());
    else if (!std::strcmp(argv[i], "--gemm")) gemm[0] = std::stod(next()), gemm[1] = std::stod(next());
    else if (argv[i][0] != '-' && run_dir.empty()) run_dir = argv[i];
    else {
      std::fprintf(stderr, "bench_grpo_report: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (table != "shares" && table != "rates") {
    std::fprintf(stderr, "bench_grpo_report: --table shares|rates is required\n");
    return 2;
  }
  if (header) {
    if (table == "shares")
      std::printf("| config | group | samples | iteration s | rollout | reward | old log-probs | ref log-probs "
                  "| actor update | other |\n|---|---|---|---|---|---|---|---|---|---|\n");
    else
      std::printf("| config | group | tokens/sample (resp.) | rollout gen. tok/s | rollout MFU | ref log-probs tok/s "
                  "| ref MFU | actor update tok/s | update MFU | GEMM GFLOP/s (before/after) |\n"
                  "|---|---|---|---|---|---|---|---|---|---|\n");
    return 0;
  }
  if (run_dir.empty() || preset.empty() || prompts <= 0 || group <= 0 || gemm[0] <= 0 || gemm[1] <= 0) {
    std::fprintf(stderr, "usage: bench_grpo_report RUN_DIR --table shares|rates --preset P --prompts N --group G "
                         "--gemm BEFORE AFTER [--epochs E] [--skip K] [--label NAME] | --table T --header\n");
    return 2;
  }
  try {
    const hpcrl::ModelArch arch = hpcrl::model_arch_preset(preset);
    std::map<std::string, double> sec;  // summed over the measured iterations
    double iter_s = 0, tokens = 0, generated = 0;
    int iters = 0;
    for (const auto& j : bench::stage_steps(run_dir, "grpo", "seconds/iteration", skip)) {
      const double s = j["seconds/iteration"].get<double>();
      iter_s += s;
      tokens += j["tokens_per_s"].get<double>() * s;
      generated += j["response_len/mean"].get<double>() * prompts * group;
      for (const char* st : kStages)
        if (j.contains(std::string("seconds/") + st)) sec[st] += j[std::string("seconds/") + st].get<double>();
      ++iters;
    }
    const std::string name = label.empty() ? preset : label;
    const double samples = prompts * group;
    if (table == "shares") {
      double staged = 0;
      std::printf("| %s | %.0f | %.0f | %.2f |", name.c_str(), group, samples, iter_s / iters);
      for (const char* st : kStages) {
        auto it = sec.find(st);
        if (it != sec.end()) staged += it->second;
        std::printf(" %s |", it != sec.end() ? pct(it->second, iter_s).c_str() : "—");
      }
      std::printf(" %s |\n", pct(iter_s - staged, iter_s).c_str());
    } else {
      const double seq = tokens / (iters * samples);  // mean prompt + response tokens of a sample
      const double g = 0.5 * (gemm[0] + gemm[1]);
      const double fwd = bench::forward_flops_per_token(arch, seq);
      auto rate = [&](const char* st, double n) { return sec.count(st) && sec[st] > 0 ? n / sec[st] : 0.0; };
      const double roll = rate("rollout", generated), ref = rate("ref_logprob", tokens);
      const double upd = rate("actor_update", tokens * epochs);
      auto mfu = [&](const char* st, double flops) { return sec.count(st) ? pct(flops / sec[st], g) : std::string("—"); };
      std::printf("| %s | %.0f | %.1f (%.1f) | %.0f | %s | %.0f | %s | %.0f | %s | %.1f (%.1f / %.1f) |\n",
                  name.c_str(), group, seq, generated / (iters * samples), roll, mfu("rollout", fwd * tokens).c_str(),
                  ref, mfu("ref_logprob", fwd * tokens).c_str(), upd,
                  mfu("actor_update", 3.0 * fwd * tokens * epochs).c_str(), g / 1e9, gemm[0] / 1e9, gemm[1] / 1e9);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_grpo_report: %s\n", e.what());
    return 1;
  }
  return 0;
}
