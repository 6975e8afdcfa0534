// `hpcrl eval`: accuracy of a checkpoint on a dataset — pass@1 and, with n > 1
// samples per prompt, the unbiased pass@k (algo/stages/pass_at_k.h) — or, with
// --responses, the scores of pre-generated responses without any model.
//   hpcrl eval --model DIR|preset:NAME --data FILE.jsonl|synthetic[:k=v,..]|PIPELINE.yaml:NAME
//       [--reward verifiable|PIPELINE.yaml[:NAME]] [--extract a,b] [--format-bonus X]
//       [--tools PIPELINE.yaml[:STAGE]]
//       [--n K] [--temperature T] [--top-p P] [--max-new-tokens N] [--prompts N] [--seed S]
//       [--batch B] [--tokenizer DIR|byte] [--chat-template T] [--prompt-key K] [--answer-key K]
//       [--tp N --sp N --ep N --pp N] [--dtype float32|bfloat16] [--json]
//   hpcrl eval --responses FILE.jsonl [--reward ...] [--json]
// The model path is algo::evaluate, the held-out evaluation every stage runs,
// so `hpcrl eval` on a checkpoint reports what the run's eval/accuracy would.
// With --pp each rank loads only its pipeline stage and, like a pipelined
// training role and `hpcrl generate --pp`, decodes on a whole (pp = 1) copy
// gathered from the stages (algo::sync_rollout_model), so accuracy equals --pp 1.
// Output shapes: docs/eval.md. Rank 0 prints; --json prints one JSON document.
#include <nlohmann/json.hpp>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "cli/command.h"
#include "cli/eval_inputs.h"
#include "cli/eval_responses.h"
#include "cli/model_loading.h"
#include "hpcrl/algo/stages/evaluation.h"
#include "hpcrl/algo/stages/pass_at_k.h"
#include "hpcrl/algo/stages/prompting.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/log.h"

namespace {

using namespace hpcrl;
using ordered_json = nlohmann::ordered_json;

struct Options {
  std::string model, adapter, data, responses, tokenizer, tools, dtype = "float32";
  cli::JsonlFlags jsonl;
  cli::RewardFlags reward;
  double format_bonus = 0;  // copied into reward.format_bonus when given
  int64_t n = 1, max_new_tokens = 256, prompts = 0, batch = 64;
  double temperature = 0.0, top_p = 1.0;
  uint64_t seed = 0;
  bool json = false;
  cli::LayoutFlags layout;
};

void check_sampling(const Options& o) {
  HPCRL_CHECK_INPUT(o.n >= 1, "--n " << o.n << ": the number of samples per prompt must be at least 1");
  HPCRL_CHECK_INPUT(o.max_new_tokens >= 1, "--max-new-tokens " << o.max_new_tokens << ": must be at least 1");
  HPCRL_CHECK_INPUT(o.batch >= 1, "--batch " << o.batch << ": must be at least 1");
  HPCRL_CHECK_INPUT(o.prompts >= 0, "--prompts " << o.prompts << ": must be >= 0 (0 = every example)");
  HPCRL_CHECK_INPUT(o.temperature >= 0, "--temperature " << o.temperature << ": must be >= 0 (0 = greedy)");
  HPCRL_CHECK_INPUT(o.top_p > 0 && o.top_p <= 1, "--top-p " << o.top_p << ": must be in (0, 1] (1 = off)");
}

ordered_json pass_json(const std::map<int64_t, double>& pass) {
  ordered_json j = ordered_json::object();
  for (const auto& [k, v] : pass) j[std::to_string(k)] = v;
  return j;
}

void print_pass_table(const std::map<int64_t, double>& pass) {
  for (const auto& [k, v] : pass) std::printf("  pass@%-5lld %7.2f %%\n", static_cast<long long>(k), 100.0 * v);
}

void print_json(const ordered_json& doc) {
  std::printf("%s\n", doc.dump(-1, ' ', false, ordered_json::error_handler_t::replace).c_str());
}

// --responses: score every line with the reward alone (no model is built).
int score_file(const Options& o, const cli::EvalReward& reward) {
  auto t0 = std::chrono::steady_clock::now();
  reward::VerifiableReward verifier(reward.config);
  cli::ScoredResponses scored = cli::score_responses(o.responses, verifier, o.jsonl.answer_marker);
  const auto pass = algo::mean_pass_at_k(scored.prompts);
  int64_t correct = 0, min_n = scored.prompts.front().n;
  for (const auto& p : scored.prompts) {
    correct += p.correct;
    min_n = std::min(min_n, p.n);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.json) {
    ordered_json doc;
    doc["responses"] = o.responses;
    doc["reward"] = reward.label;
    doc["examples"] = scored.prompts.size();
    doc["n"] = min_n;
    doc["samples"] = scored.lines.size();
    doc["correct"] = correct;
    doc["pass_at_k"] = pass_json(pass);
    doc["mean_score"] = scored.mean_score;
    doc["seconds"] = seconds;
    ordered_json lines = ordered_json::array();
    for (const auto& s : scored.lines)
      lines.push_back({{"line", s.line}, {"prompt_index", s.prompt_index}, {"score", s.score},
                       {"correct", s.correct}, {"extracted", s.extracted}, {"extractor", s.extractor}});
    doc["lines"] = std::move(lines);
    print_json(doc);
    return 0;
  }
  constexpr size_t kShown = 20;
  std::printf("%6s %7s %7s %-12s %s\n", "line", "correct", "score", "extractor", "extracted");
  for (size_t i = 0; i < scored.lines.size() && i < kShown; ++i) {
    const auto& s = scored.lines[i];
    std::string shown = nlohmann::json(s.extracted).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("%6lld %7s %7.3f %-12s %s\n", static_cast<long long>(s.line), s.correct ? "yes" : "no", s.score,
                s.extractor.empty() ? "-" : s.extractor.c_str(), shown.c_str());
  }
  if (scored.lines.size() > kShown)
    std::printf("  ... %zu more lines (--json lists every line)\n", scored.lines.size() - kShown);
  std::printf("%s: %zu responses to %zu prompts, %lld correct, mean score %.4f, reward %s\n", o.responses.c_str(),
              scored.lines.size(), scored.prompts.size(), static_cast<long long>(correct), scored.mean_score,
              reward.label.c_str());
  print_pass_table(pass);
  return 0;
}

// With expert parallelism every rank of an ep group must call the engine equally
// often (each MoE layer is a collective over ep); evaluate() runs one call per
// batch of its dp rank's block of examples.
void check_ep_batches(const Options& o, int64_t total, int dp) {
  if (o.layout.ep == 1 || dp == 1) return;
  auto calls = [&](int r) {
    const int64_t rows = total * (r + 1) / dp - total * r / dp;
    return (rows + o.batch - 1) / o.batch;
  };
  for (int r = 1; r < dp; ++r)
    HPCRL_CHECK_INPUT(calls(r) == calls(0), "--ep " << o.layout.ep << " with " << dp << " data-parallel ranks: the "
                      << total << " prompts split into unequal numbers of --batch " << o.batch << " batches per rank, "
                      << "and expert-parallel ranks must step together; make --prompts a multiple of " << dp * o.batch
                      << " or raise --batch to at least " << (total + dp - 1) / dp);
}

// Every evaluated prompt, with --max-new-tokens, must fit the model's context.
void check_prompt_lengths(const Options& o, const cli::EvalData& data, const algo::PromptBuilder& prompts,
                          int64_t total, const ModelArch& arch) {
  for (int64_t i = 0; i < total; ++i) {
    const io::Example& ex = data.examples[i];
    const int64_t len = static_cast<int64_t>(prompts.prompt_ids(ex).size());
    HPCRL_CHECK_INPUT(len + o.max_new_tokens <= arch.max_position_embeddings,
                      data.label << (ex.line > 0 ? ":" + std::to_string(ex.line) : " example " + std::to_string(i))
                      << ": the prompt has " << len << " tokens; with --max-new-tokens " << o.max_new_tokens
                      << " it exceeds the model's context of " << arch.max_position_embeddings
                      << " tokens: lower --max-new-tokens or evaluate on shorter prompts");
  }
}

// The loaded model as the role algo::evaluate samples from.
algo::Role eval_role(const cli::LoadedModel& lm, std::shared_ptr<io::Tokenizer> tok) {
  algo::Role role;
  role.name = "eval";
  role.model = lm.model;
  role.ctx = lm.ctx;
  role.mesh = lm.mesh;
  role.tokenizer = std::move(tok);
  return role;
}

algo::EvalOptions eval_options(const Options& o, int64_t total) {
  algo::EvalOptions eo;
  eo.prompts = total;
  eo.n = o.n;
  eo.temperature = o.temperature;
  eo.top_p = o.top_p;
  eo.max_new_tokens = o.max_new_tokens;
  eo.batch = o.batch;
  eo.seed = o.seed;
  eo.loss = false;
  return eo;
}

// What a model evaluation reports: its result, the correct samples and pass@k.
struct ModelEval {
  algo::EvalResult result;
  int64_t correct = 0;
  std::map<int64_t, double> pass;
};

void print_model_eval(const Options& o, const cli::EvalReward& reward, const cli::EvalData& data,
                      const cli::EvalTools& tools, const ModelEval& m, const std::string& mesh) {
  const algo::EvalResult& r = m.result;
  if (o.json) {
    ordered_json doc;
    doc["model"] = o.model;
    doc["data"] = data.label;
    doc["reward"] = reward.label;
    if (tools.kit) doc["tools"] = tools.label;
    doc["examples"] = r.examples;
    doc["n"] = o.n;
    doc["samples"] = r.examples * o.n;
    doc["correct"] = m.correct;
    doc["pass_at_k"] = pass_json(m.pass);
    doc["mean_response_len"] = r.response_len;
    doc["temperature"] = o.temperature;
    doc["top_p"] = o.top_p;
    doc["max_new_tokens"] = o.max_new_tokens;
    doc["seed"] = o.seed;
    doc["seconds"] = r.seconds;
    print_json(doc);
    return;
  }
  std::printf("%s on %s: %lld examples x %lld samples (%s), reward %s\n", o.model.c_str(), data.label.c_str(),
              static_cast<long long>(r.examples), static_cast<long long>(o.n),
              o.temperature == 0 ? "greedy" : fmt::format("temperature {}", o.temperature).c_str(),
              reward.label.c_str());
  if (tools.kit) std::printf("multi-turn over the tools of %s\n", tools.label.c_str());
  print_pass_table(m.pass);
  std::printf("%lld of %lld samples correct; mean response %.1f tokens; %.1f s (%s)\n",
              static_cast<long long>(m.correct), static_cast<long long>(r.examples * o.n), r.response_len, r.seconds,
              mesh.c_str());
}

int evaluate_model(const Options& o, const cli::EvalReward& reward, const dist::WorldInfo& world) {
  HPCRL_CHECK_INPUT(!o.model.empty(), "--model is required (a checkpoint directory or preset:NAME), unless "
                                      "--responses FILE.jsonl scores pre-generated responses");
  HPCRL_CHECK_INPUT(!o.data.empty(), "--data is required with --model: FILE.jsonl, synthetic[:key=value,...] or "
                                     "PIPELINE.yaml:NAME");
  if (o.n > 1 && o.temperature == 0)
    spdlog::warn("--n {} with --temperature 0: greedy samples are identical, so every pass@k equals pass@1; "
                 "sample with e.g. --temperature 0.8", o.n);
  ModelArch arch = model::resolve_model_arch(o.model);
  std::shared_ptr<io::Tokenizer> tok =
      cli::command_tokenizer(o.model, o.tokenizer,
                             "'" + o.model + "' has no tokenizer.json, and eval needs one to build prompts and read "
                             "responses: pass --tokenizer DIR (or --tokenizer byte, the built-in byte tokenizer)");
  cli::EvalData data = cli::load_eval_data(o.data, o.jsonl, *tok);
  const cli::EvalTools tools = cli::load_eval_tools(o.tools, o.max_new_tokens);
  algo::PromptBuilder prompts(*tok, data.config.get(), tools::tool_schemas(tools.kit.get()));
  const int64_t total = o.prompts > 0 ? std::min<int64_t>(o.prompts, data.examples.size()) : data.examples.size();
  check_prompt_lengths(o, data, prompts, total, arch);

  cli::LoadedModel lm = cli::load_command_model({o.model, o.adapter, o.dtype, o.seed}, arch, o.layout, "eval");
  check_ep_batches(o, total, lm.mesh.dp());
  algo::Role role = eval_role(lm, tok);
  spdlog::info("eval: {} examples of {} x {} samples, reward {} ({})", total, data.label, o.n, reward.label,
               lm.mesh.describe());
  reward::VerifiableReward verifier(reward.config);
  ModelEval m;
  algo::EvalOptions options = eval_options(o, total);
  options.tools = tools.kit.get();
  m.result = algo::evaluate(role, data.examples, prompts, verifier, options);

  std::vector<algo::SampleCounts> counts;
  for (int64_t c : m.result.correct_per_example) {
    counts.push_back({o.n, c});
    m.correct += c;
  }
  m.pass = algo::mean_pass_at_k(counts);
  if (world.rank != 0) return 0;
  print_model_eval(o, reward, data, tools, m, lm.mesh.describe());
  return 0;
}

// The rank a launcher gave this process (0 without one), read without starting MPI.
int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  return 0;
}

int run(Options o, bool format_bonus_given) {
  if (format_bonus_given) o.reward.format_bonus = o.format_bonus;
  if (!o.responses.empty()) {
    // Offline scoring needs neither a model nor MPI (whose start-up alone takes longer than scoring
    // thousands of lines); under a launcher, only its rank 0 prints.
    HPCRL_CHECK_INPUT(o.model.empty() && o.data.empty() && o.tools.empty(),
                      "--responses scores pre-generated responses without a model: drop --model, --data and --tools "
                      "(or drop --responses to generate with the model)");
    cli::EvalReward reward = cli::parse_reward(o.reward);
    return launcher_rank() == 0 ? score_file(o, reward) : 0;
  }
  const dist::WorldInfo& world = dist::init(nullptr, nullptr);
  log::init(world.rank, world.size, cli::global_options().log_level);
  int code = dist::run_or_abort([&] {
    check_sampling(o);
    return evaluate_model(o, cli::parse_reward(o.reward), world);
  });
  dist::finalize();
  return code;
}

hpcrl::cli::Registration reg{"eval", 65, [](CLI::App& app) {
  static Options o;
  auto* sub = app.add_subcommand("eval", "Accuracy (pass@1, pass@k) of a model on a dataset, or scores of "
                                         "pre-generated responses (--responses)");
  sub->add_option("--model", o.model, "HF model directory (config.json + safetensors) or preset:NAME");
  sub->add_option("--adapter", o.adapter, "PEFT LoRA adapter directory applied on top of --model");
  sub->add_option("--data", o.data, "FILE.jsonl | synthetic[:digits=2,terms=2,ops=+,eval=500,seed=1] | "
                                    "PIPELINE.yaml:DATASET (its held-out split)");
  sub->add_option("--responses", o.responses, "Score this JSONL of responses ({\"response\", \"answer\"[, "
                                              "\"prompt_index\"]} per line) instead of generating; no model");
  sub->add_option("--reward", o.reward.spec, "verifiable | PIPELINE.yaml[:REWARD]")->capture_default_str();
  sub->add_option("--tools", o.tools, "PIPELINE.yaml[:STAGE]: evaluate multi-turn over the tools of stage STAGE "
                                      "(its index; the only stage with tools when omitted), as its evaluations do");
  sub->add_option("--extract", o.reward.extract, "Extractor order for --reward verifiable, e.g. boxed,last_number "
                                                 "(default boxed,answer_tag,hash,answer_is,last_number)");
  auto* bonus = sub->add_option("--format-bonus", o.format_bonus, "Bonus for <think>…</think> then an answer "
                                                                  "(--reward verifiable)");
  sub->add_option("--n", o.n, "Samples per prompt (pass@k for k = 1, 2, 4, .., n)")->capture_default_str();
  sub->add_option("--temperature", o.temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  sub->add_option("--top-p", o.top_p, "Nucleus sampling mass (1 = off)")->capture_default_str();
  sub->add_option("--max-new-tokens", o.max_new_tokens, "Longest response")->capture_default_str();
  sub->add_option("--prompts", o.prompts, "Evaluate the first N examples (0 = all)")->capture_default_str();
  sub->add_option("--seed", o.seed, "Sampling seed (and initial weights of presets)")->capture_default_str();
  sub->add_option("--batch", o.batch, "Prompts generated together")->capture_default_str();
  sub->add_option("--tokenizer", o.tokenizer,
                  "Tokenizer directory or byte (default: the one the model directory records)");
  sub->add_option("--chat-template", o.jsonl.chat_template, "For --data FILE.jsonl: none, chatml, qwen3 or llama3")
      ->capture_default_str();
  sub->add_option("--system-prompt", o.jsonl.system_prompt, "For --data FILE.jsonl with a chat template");
  sub->add_option("--prompt-key", o.jsonl.prompt_key, "For --data FILE.jsonl: key of the prompt")
      ->capture_default_str();
  sub->add_option("--answer-key", o.jsonl.answer_key, "For --data FILE.jsonl: key of the answer")
      ->capture_default_str();
  sub->add_option("--answer-marker", o.jsonl.answer_marker, "Gold answer = text after the last marker "
                                                            "(\"\" = the whole field)")->capture_default_str();
  cli::add_layout_options(sub, o.layout, "Sequence-parallel size");
  sub->add_option("--dtype", o.dtype, "float32 or bfloat16")->capture_default_str();
  sub->add_flag("--json", o.json, "Print one JSON document (docs/eval.md) on stdout");
  return [bonus] { return run(o, bonus->count() > 0); };
}};

}  // namespace
