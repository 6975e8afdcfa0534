// What `hpcrl eval` reads besides the model: the examples of --data and the
// verifier of --reward, from compact command-line specs (docs/eval.md):
//   --data FILE.jsonl                 every row (keys --prompt-key/--answer-key,
//                                     gold answer after --answer-marker, GSM8K as is)
//   --data synthetic[:k=v,...]        the built-in task's held-out split; keys as in
//                                     YAML `synthetic:` (task, digits, terms, ops, eval, seed)
//   --data PIPELINE.yaml:NAME         the held-out split of dataset NAME exactly as
//                                     `hpcrl run` builds it (template, limits, seed)
//   --reward verifiable               with --extract a,b,... and --format-bonus X
//   --reward PIPELINE.yaml[:NAME]     reward NAME of a pipeline file (the only one when NAME is omitted)
//   --tools PIPELINE.yaml[:STAGE]     the tools, call format and limits of stage STAGE (its index in
//                                     `stages:`; the only stage with tools when omitted): evaluation
//                                     is multi-turn over them, as that stage's evaluations are
// Every malformed spec is an InputError naming the flag, the bad part and the fix.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/io/dataset.h"
#include "hpcrl/io/tokenizer.h"
#include "hpcrl/reward/verifiable.h"
#include "hpcrl/tools/stage_toolkit.h"

namespace hpcrl::cli {

// How rows of a JSONL --data file are read (the YAML `jsonl:` keys of the same names).
struct JsonlFlags {
  std::string prompt_key = "question";
  std::string answer_key = "answer";
  std::string answer_marker = "####";
  std::string chat_template = "none";  // none | chatml | qwen3 | llama3
  std::string system_prompt;
};

struct EvalData {
  io::Dataset examples;
  // How prompts are built from the examples (algo::PromptBuilder reads it).
  std::unique_ptr<config::DatasetConfig> config;
  std::string label;  // "gsm8k/test.jsonl", "synthetic:digits=2,...", "quickstart.yaml:arith (eval split)"
};

EvalData load_eval_data(const std::string& spec, const JsonlFlags& jsonl, const io::Tokenizer& tokenizer);

struct RewardFlags {
  std::string spec = "verifiable";
  std::string extract;                 // "boxed,last_number"; "" = the default order
  std::optional<double> format_bonus;  // --format-bonus
};

struct EvalReward {
  reward::VerifiableRewardConfig config;
  std::string label;  // "verifiable (extract: boxed, last_number)" or "pipeline.yaml:math"
};

EvalReward parse_reward(const RewardFlags& flags);

struct EvalTools {
  std::unique_ptr<tools::StageToolkit> kit;  // null without --tools: single-turn
  std::string label;                          // "tiny_tools.yaml:0 (calculator)"
};

// `spec` empty: no tools. InputError when the stage has no tools, names none
// of the file's stages with tools, or its replies cannot fit max_new_tokens.
EvalTools load_eval_tools(const std::string& spec, int64_t max_new_tokens);

}  // namespace hpcrl::cli
