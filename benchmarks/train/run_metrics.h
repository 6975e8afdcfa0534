// Shared by the training benchmarks' report tools (bench_sft_report,
// bench_grpo_report): the lines a finished run wrote to RUN/metrics.jsonl for
// one stage, and the model-FLOPs count that turns tokens/s into FLOP/s.
//
// Model FLOPs per token (PaLM, appendix B): a forward pass costs
//   2·N + 4·L·T·H·D
// with N the non-embedding parameters plus the LM head matmul (V·C; the input
// embedding is a lookup), L layers, H heads of width D and T the sequence
// length (the attention scores and the weighted values, each 2·T·D per head);
// a training step (forward + backward) costs three times that: 6·N + 12·L·T·H·D.
// Only real tokens are counted, not padding.
#pragma once

#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "hpcrl/config/model_arch.h"

namespace bench {

inline double forward_flops_per_token(const hpcrl::ModelArch& a, double seq) {
  const double C = a.hidden_size, V = a.vocab_size;
  const double non_embedding = a.num_parameters() - V * C * (a.tie_word_embeddings ? 1 : 2);
  return 2.0 * (non_embedding + V * C) + 4.0 * a.num_layers * seq * a.num_heads * a.head_dim;
}

inline double training_flops_per_token(const hpcrl::ModelArch& a, double seq) {
  return 3.0 * forward_flops_per_token(a, seq);
}

// The metrics lines of `stage` that carry `key` (training steps, not evaluations),
// with "step" > skip, in file order.
inline std::vector<nlohmann::json> stage_steps(const std::string& run_dir, const std::string& stage,
                                               const std::string& key, int skip) {
  const std::string path = run_dir + "/metrics.jsonl";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path + " (did the run finish?)");
  std::vector<nlohmann::json> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw std::runtime_error(path + ":" + std::to_string(n) + ": not a JSON object");
    if (j.value("stage", "") == stage && j.contains(key) && j[key].is_number() && j.value("step", 0) > skip)
      out.push_back(std::move(j));
  }
  if (out.empty())
    throw std::runtime_error(path + ": no '" + stage + "' lines with '" + key + "' after step " + std::to_string(skip) +
                             " (run more steps or lower --skip)");
  return out;
}

}  // namespace bench
