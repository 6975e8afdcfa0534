// A run directory written by hand for the estimate-beside-measurement tests: a
// one-rank SFT stage of tiny-2l (config.resolved.yaml), its metrics.jsonl (rows
// of 30 tokens on average, the longest 40) and one trace whose span durations
// make every measured number a hand-worked one:
//   the stage span, 4 steps of 1 s each, 2 s apart; in step k a forward/backward
//   of 0.6 + 0.1·k s and an optimizer step of 0.05 s. The first step is left
//   out (warm-up), so per step: sft/step 1 s, sft/forward_backward the median of
//   0.7, 0.8, 0.9 = 0.8 s, sft/optimizer 0.05 s. An evaluation's forward/backward
//   after the last step (inside the stage, outside every step) must not count.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace cost_test {

inline void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

inline void write_synthetic_sft_run(const std::string& dir) {
  write_file(dir + "/config.resolved.yaml", R"(run: {name: synthetic, device: cpu}
models:
  policy: {init: {preset: tiny-2l}}
data:
  arith: {synthetic: {task: arithmetic, digits: 2, train: 100, eval: 10}}
stages:
  - sft: {model: policy, data: arith, steps: 4, batch: 8}
)");
  std::string metrics;
  for (int k = 1; k <= 4; ++k)
    metrics += R"({"stage":"sft","stage_index":0,"step":)" + std::to_string(k) +
               R"(,"time":1.0,"loss":1.0,"tokens_per_s":100.0,"seconds/step":1.0,"seq_len/mean":30.0,"seq_len/max":40.0})" "\n";
  write_file(dir + "/metrics.jsonl", metrics);
  auto span = [](const std::string& name, double ts, double dur, const std::string& args = "{}") {
    return R"({"name":")" + name + R"(","cat":"span","ph":"X","pid":0,"tid":0,"ts":)" + std::to_string(ts) +
           R"(,"dur":)" + std::to_string(dur) + R"(,"args":)" + args + "},\n";
  };
  std::string t = "[\n" + span("sft", 0, 10e6, R"({"stage_index":0})");
  for (int k = 0; k < 4; ++k) {
    const double at = 2e6 * k, fb = (0.6 + 0.1 * k) * 1e6;
    t += span("sft/step", at, 1e6, R"({"step":)" + std::to_string(k) + "}");
    t += span("sft/forward_backward", at + 1e4, fb);
    t += span("sft/optimizer", at + 2e4 + fb, 5e4);
  }
  t += span("sft/forward_backward", 8.5e6, 1e6);  // an evaluation's, outside every step
  t.resize(t.size() - 2);
  write_file(dir + "/trace/rank-00000.json", t + "\n]\n");
}

}  // namespace cost_test
