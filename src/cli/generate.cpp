// `hpcrl generate`: batch generation from a checkpoint or preset with the
// rollout engine — the tool for looking at what a policy writes, and the same
// code path GRPO/PPO rollouts take.
//   hpcrl generate --model DIR|preset:NAME --prompts FILE.jsonl [--n K] [--temperature T]
//       [--top-p P] [--top-k K] [--max-new-tokens N] [--seed S] [--stop TEXT]...
//       [--chat-template auto|NAME|none] [--tokenizer DIR|byte] [--max-batch B]
//       [--out FILE.jsonl] [--tp N --sp N --ep N --pp N] [--dtype float32|bfloat16]
// Input lines and output objects: docs/rollout.md, `hpcrl generate` (rollout/prompt_file.h).
// Under mpirun the model is split with the layout flags; the prompts are
// divided between the sp × dp generation replicas (sample randomness depends
// only on the global prompt index, so the output does not depend on the
// layout), and rank 0 writes every sample, in (prompt, sample) order, to --out
// atomically or to stdout.
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/command.h"
#include "cli/model_loading.h"
#include "hpcrl/config/enums.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/io/tokenizer.h"
#include "hpcrl/model/pipeline_stage.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/prompt_file.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/log.h"
#include "hpcrl/util/progress.h"
#include "hpcrl/util/strings.h"

namespace {

using namespace hpcrl;

struct Options {
  std::string model, adapter, prompts, out, tokenizer, chat_template = "auto", dtype = "float32";
  std::vector<std::string> stop;
  int64_t n = 1, top_k = 0, max_new_tokens = 256, max_batch = 64;
  double temperature = 1.0, top_p = 1.0, min_p = 0.0;
  uint64_t seed = 0;
  cli::LayoutFlags layout;
};

// Unknown options reach us as CLI11 "extras": name the closest real one.
void reject_extras(const std::vector<std::string>& extras, const CLI::App& sub) {
  if (extras.empty()) return;
  std::vector<std::string> names;
  for (const CLI::Option* opt : sub.get_options())
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
  const std::string& bad = extras.front();
  if (bad.empty() || bad[0] != '-')
    throw InputError("unexpected argument '" + bad + "' for hpcrl generate: every input is an option "
                     "(hpcrl generate --help lists them)");
  std::string hint = str::closest(bad.substr(0, bad.find('=')), names);
  throw InputError("unknown option '" + bad + "' for hpcrl generate" +
                   (hint.empty() ? std::string("") : "; did you mean " + hint + "?") +
                   " (hpcrl generate --help lists the options)");
}

void check_options(const Options& o) {
  HPCRL_CHECK_INPUT(o.n >= 1, "--n " << o.n << ": the number of samples per prompt must be at least 1");
  HPCRL_CHECK_INPUT(o.max_new_tokens >= 1, "--max-new-tokens " << o.max_new_tokens << ": must be at least 1");
  HPCRL_CHECK_INPUT(o.max_batch >= 1, "--max-batch " << o.max_batch << ": must be at least 1");
  HPCRL_CHECK_INPUT(o.temperature >= 0, "--temperature " << o.temperature << ": must be >= 0 (0 = greedy)");
  HPCRL_CHECK_INPUT(o.top_p > 0 && o.top_p <= 1, "--top-p " << o.top_p << ": must be in (0, 1] (1 = off)");
  HPCRL_CHECK_INPUT(o.top_k >= 0, "--top-k " << o.top_k << ": must be >= 0 (0 = off)");
  HPCRL_CHECK_INPUT(o.min_p >= 0 && o.min_p < 1, "--min-p " << o.min_p << ": must be in [0, 1) (0 = off)");
  HPCRL_CHECK_INPUT(o.dtype == "float32" || o.dtype == "bfloat16",
                    "--dtype must be float32 or bfloat16, got '" << o.dtype << "'");
}

std::string sample_line(const rollout::PromptRequest& req, int64_t prompt_index, const rollout::Sample& s,
                        const io::Tokenizer& tok) {
  nlohmann::ordered_json j;
  j["prompt_index"] = prompt_index;
  j["sample_index"] = s.sample_index;
  j["prompt"] = req.text;
  j["prompt_ids"] = req.ids;
  j["response"] = tok.decode(s.tokens, /*skip_special=*/true);
  j["response_ids"] = s.tokens;
  j["logprobs"] = s.logprobs;
  j["finish_reason"] = s.finish_reason;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// Every rank's `text`, concatenated in world-rank order, on every rank.
std::string gather_text(const std::string& text) {
  dist::CommPtr world = dist::world_comm();
  at::Tensor len = world->all_gather(at::tensor({static_cast<int64_t>(text.size())}, at::kLong));
  const int64_t longest = len.max().item<int64_t>();
  at::Tensor mine = at::zeros({longest}, at::kByte);
  std::memcpy(mine.data_ptr(), text.data(), text.size());
  at::Tensor all = world->all_gather(mine);  // [size · longest]
  std::string out;
  for (int r = 0; r < world->size(); ++r)
    out.append(static_cast<const char*>(all.data_ptr()) + r * longest, static_cast<size_t>(len[r].item<int64_t>()));
  return out;
}

// --chat-template as the config enum: "auto" is the tokenizer's own template (config::ChatTemplate::model).
config::ChatTemplate chat_template_option(const std::string& name) {
  if (name == "auto") return config::ChatTemplate::model;
  const std::vector<std::string> names = {"auto", "none", "chatml", "qwen3", "llama3"};
  if (std::find(names.begin(), names.end(), name) != names.end())
    return *config::parse_enum<config::ChatTemplate>(name);
  // The pipeline file's `model` is spelled auto here.
  std::string hint = name == "model" ? "auto" : str::closest(name, names);
  throw InputError("--chat-template '" + name + "'" + (hint.empty() ? "" : ": did you mean '" + hint + "'?") +
                   " (one of " + str::join(names, ", ") + ")");
}

// The prompt file, every prompt checked to leave room for --max-new-tokens in the model's context.
rollout::PromptFile load_prompts(const Options& o, const ModelArch& arch, const io::Tokenizer& tok,
                                 config::ChatTemplate chat_template) {
  rollout::PromptFile file = rollout::read_prompt_file(o.prompts, tok, arch.vocab_size, chat_template);
  for (const auto& r : file.prompts)
    HPCRL_CHECK_INPUT(int64_t(r.ids.size()) + o.max_new_tokens <= arch.max_position_embeddings,
                      o.prompts << ":" << r.line << ": the prompt has " << r.ids.size() << " tokens; with "
                                << "--max-new-tokens " << o.max_new_tokens << " it exceeds the model's context of "
                                << arch.max_position_embeddings
                                << " tokens: shorten the prompt or lower --max-new-tokens");
  return file;
}

// The model this rank decodes on: every stage of a pipeline decodes on a whole copy
// (model::make_whole_copy); stage 0 writes.
std::shared_ptr<model::DecoderModel> decoding_model(const cli::LoadedModel& lm, const Options& o) {
  std::shared_ptr<model::DecoderModel> decoder = lm.model;
  if (lm.ctx.pp_size() > 1) {
    decoder = model::make_whole_copy(*lm.model);
    model::sync_whole_copy(*lm.model, *decoder, o.model);
  }
  return decoder;
}

// This rank's generation replica's prompts: [first, last) of the file's.
struct ReplicaPrompts {
  int64_t first = 0, last = 0;
  std::vector<std::vector<int32_t>> ids;
};

ReplicaPrompts replica_prompts(const dist::Mesh& mesh, const dist::MeshCoord& c, const rollout::PromptFile& file) {
  // sp and dp ranks decode independently.
  const int64_t replicas = int64_t(mesh.sp()) * mesh.dp(), replica = int64_t(c.dp) * mesh.sp() + c.sp;
  const int64_t P = int64_t(file.prompts.size());
  ReplicaPrompts out;
  out.first = replica * P / replicas;
  out.last = (replica + 1) * P / replicas;
  for (int64_t p = out.first; p < out.last; ++p) out.ids.push_back(file.prompts[p].ids);
  return out;
}

rollout::SamplingParams sampling_params(const Options& o, const io::Tokenizer& tok, bool chat, int64_t first) {
  rollout::SamplingParams sampling;
  sampling.temperature = o.temperature;
  sampling.top_p = o.top_p;
  sampling.top_k = o.top_k;
  sampling.min_p = o.min_p;
  sampling.max_new_tokens = o.max_new_tokens;
  sampling.stop = o.stop;
  sampling.eos_ids = rollout::stop_token_ids(tok, chat);
  sampling.seed = o.seed;
  sampling.prompt_offset = first;
  return sampling;
}

// Decodes the replica's prompts, with a progress line that ends with the throughput.
std::vector<rollout::Sample> generate_samples(const Options& o, std::shared_ptr<model::DecoderModel> decoder,
                                              const io::Tokenizer& tok, const ReplicaPrompts& replica,
                                              const rollout::SamplingParams& sampling, int rank) {
  Progress progress("generate", long(replica.ids.size() * o.n), rank == 0, "seq", 10.0);
  rollout::EngineOptions eo;
  eo.max_batch = o.max_batch;
  eo.progress = [&](int64_t done, int64_t) { progress.update(long(done)); };
  rollout::Engine engine(decoder, &tok, eo);
  trace::TimedSpan span("generate");
  std::vector<rollout::Sample> samples = engine.generate(replica.ids, o.n, sampling);
  const double seconds = span.elapsed_seconds();
  const rollout::GenerateStats& st = engine.last_stats();
  const int64_t tokens = st.generated_tokens;
  // Decode alone: the tokens after each sequence's first (which its prefill gives) over the decode steps' time.
  const int64_t decoded = tokens - int64_t(samples.size());
  char timing[160];
  std::snprintf(timing, sizeof timing, "; prefill %.3f s, decode %.3f s (%.1f tok/s)", st.prefill_seconds,
                st.decode_seconds, decoded / std::max(st.decode_seconds, 1e-9));
  progress.finish(std::to_string(tokens) + " tokens, " + std::to_string(int64_t(tokens / std::max(seconds, 1e-9))) +
                  " tok/s" + timing);
  return samples;
}

// Rank 0 writes every replica's samples, in (prompt, sample) order, to --out or stdout.
void write_samples(const Options& o, const std::string& all, int64_t prompts, const dist::Mesh& mesh) {
  if (o.out.empty()) {
    std::fwrite(all.data(), 1, all.size(), stdout);
  } else {
    fs::write_file_atomic(o.out, all);
    spdlog::info("wrote {} samples of {} prompts to {} ({})", prompts * o.n, prompts, o.out, mesh.describe());
  }
}

int run(const Options& o, const std::vector<std::string>& extras, const CLI::App& sub) {
  const dist::WorldInfo& world = dist::init(nullptr, nullptr);
  log::init(world.rank, world.size, cli::global_options().log_level);
  int code = dist::run_or_abort([&] {
    reject_extras(extras, sub);
    check_options(o);
    const config::ChatTemplate chat_template = chat_template_option(o.chat_template);
    ModelArch arch = model::resolve_model_arch(o.model);
    std::unique_ptr<io::Tokenizer> tok = cli::command_tokenizer(
        o.model, o.tokenizer,
        "'" + o.model + "' has no tokenizer.json, and generate needs one to read prompts and write responses as "
        "text: pass --tokenizer DIR (or --tokenizer byte, the built-in byte tokenizer)");
    rollout::PromptFile file = load_prompts(o, arch, *tok, chat_template);

    cli::LoadedModel lm = cli::load_command_model({o.model, o.adapter, o.dtype, o.seed}, arch, o.layout, "generate");
    std::shared_ptr<model::DecoderModel> decoder = decoding_model(lm, o);
    const dist::MeshCoord c = lm.mesh.coord(world.rank);
    const ReplicaPrompts replica = replica_prompts(lm.mesh, c, file);
    std::vector<rollout::Sample> samples = generate_samples(
        o, decoder, *tok, replica, sampling_params(o, *tok, file.chat, replica.first), world.rank);

    std::string mine;
    if (c.tp == 0 && c.pp == 0)
      for (const auto& s : samples)
        mine += sample_line(file.prompts[replica.first + s.prompt_index], replica.first + s.prompt_index, s, *tok);
    std::string all = gather_text(mine);
    if (world.rank != 0) return 0;
    write_samples(o, all, int64_t(file.prompts.size()), lm.mesh);
    return 0;
  });
  dist::finalize();
  return code;
}

hpcrl::cli::Registration reg{"generate", 60, [](CLI::App& app) {
  static Options o;
  auto* sub = app.add_subcommand("generate", "Sample responses to a JSONL file of prompts with the rollout engine");
  sub->allow_extras();
  // Unknown options stay here (no fallthrough to the parent), where reject_extras
  // names the closest real one; the parent's --log-level is accepted here too.
  sub->fallthrough(false);
  sub->add_option("--log-level", cli::global_options().log_level, "trace|debug|info|warn|error|off");
  sub->add_option("--model", o.model, "HF model directory (config.json + safetensors) or preset:NAME")->required();
  sub->add_option("--adapter", o.adapter, "PEFT LoRA adapter directory applied on top of --model (unmerged: each "
                                          "adapted projection adds its low-rank product every step)");
  sub->add_option("--prompts", o.prompts, "JSONL: {\"prompt\": ..} | {\"messages\": [..]} | {\"prompt_ids\": [..]}")
      ->required();
  sub->add_option("--out", o.out, "Output JSONL, one object per sample (default: stdout)");
  sub->add_option("--n", o.n, "Samples per prompt")->capture_default_str();
  sub->add_option("--temperature", o.temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  sub->add_option("--top-p", o.top_p, "Nucleus sampling mass (1 = off)")->capture_default_str();
  sub->add_option("--top-k", o.top_k, "Keep the k most likely tokens (0 = off)")->capture_default_str();
  sub->add_option("--min-p", o.min_p, "Keep tokens at least this share of the most likely one's probability (0 = off)")
      ->capture_default_str();
  sub->add_option("--max-new-tokens", o.max_new_tokens, "Longest response")->capture_default_str();
  sub->add_option("--seed", o.seed, "Sampling seed (and initial weights of presets)")->capture_default_str();
  sub->add_option("--stop", o.stop, "Stop string (repeatable); kept in the response");
  sub->add_option("--chat-template", o.chat_template, "For \"messages\" lines: auto (the tokenizer's), chatml, "
                                                       "qwen3, llama3 or none")->capture_default_str();
  sub->add_option("--tokenizer", o.tokenizer,
                  "Tokenizer directory or byte (default: the one the model directory records)");
  sub->add_option("--max-batch", o.max_batch, "Sequences decoded together")->capture_default_str();
  cli::add_layout_options(sub, o.layout, "Sequence-parallel size (its ranks decode separately)");
  sub->add_option("--dtype", o.dtype, "float32 or bfloat16")->capture_default_str();
  return [sub] { return run(o, sub->remaining(), *sub); };
}};

}  // namespace
