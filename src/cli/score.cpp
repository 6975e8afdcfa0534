// `hpcrl score`: per-token log-probabilities of a token sequence under a model —
// the tool to reach for when a run's numbers look wrong (does the checkpoint
// load? does tp=2 give what tp=1 gives?).
//   hpcrl score --model DIR|preset:NAME (--ids 1,2,3 | --text "...") [--tokenizer DIR]
//               [--json] [--tp N --sp N --ep N --pp N] [--dtype float32|bfloat16] [--seed N]
//               [--pp-schedule 1f1b|gpipe|interleaved] [--pp-microbatches M] [--pp-virtual V]
// logprobs[t-1] = log p(ids[t] | ids[<t]) for t ≥ 1; --json prints exactly
// {"ids": [..], "logprobs": [..]} (docs/model.md) from world rank 0. Under mpirun
// the model is split with the layout flags; ranks beyond tp·sp·pp are data-
// parallel replicas that compute the same numbers. With --pp > 1 the forward
// pass runs through the pipeline schedule (model/pipeline_stage.h); the
// sequence is scored as M identical micro-batches so that a schedule with
// several micro-batches in flight (interleaved needs M % pp == 0) is
// exercised too — every copy must come out bit-identical, which is checked.
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/model_loading.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/io/tokenizer.h"
#include "hpcrl/model/pipeline_stage.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/parallel/pipeline/schedule.h"
#include "hpcrl/parallel/sequence/ulysses.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/log.h"
#include "hpcrl/util/strings.h"

namespace {

using namespace hpcrl;

struct Options {
  std::string model, adapter, ids, text, tokenizer, dtype = "float32", pp_schedule = "1f1b";
  int pp_microbatches = 1;
  bool json = false;
  cli::LayoutFlags layout;
  uint64_t seed = 0;
};

std::vector<int64_t> input_ids(const Options& o, const ModelArch& arch, const io::Tokenizer* tok) {
  HPCRL_CHECK_INPUT(o.ids.empty() != o.text.empty(), "give exactly one of --ids and --text");
  std::vector<int64_t> ids;
  if (!o.ids.empty()) {
    for (long long v : str::parse_int_list(o.ids, "--ids")) ids.push_back(v);
  } else {
    for (int32_t v : tok->encode(o.text, /*add_special=*/true)) ids.push_back(v);
  }
  HPCRL_CHECK_INPUT(!ids.empty(), "no tokens to score");
  for (size_t i = 0; i < ids.size(); ++i)
    HPCRL_CHECK_INPUT(ids[i] >= 0 && ids[i] < arch.vocab_size, "token id " << ids[i] << " at position " << i
                                                                           << " is outside the model's vocabulary [0, "
                                                                           << arch.vocab_size << ")");
  return ids;
}

// The sequence padded to `padded` tokens: input ids, next-token targets and the mask of real tokens.
struct ScoreBatch {
  at::Tensor full, targets, mask;  // [1, padded] each
};

ScoreBatch score_batch(const std::vector<int64_t>& ids, int64_t padded) {
  const int64_t n = static_cast<int64_t>(ids.size());
  ScoreBatch b;
  b.full = torch::zeros({1, padded}, torch::kLong);
  b.targets = torch::zeros({1, padded}, torch::kLong);
  b.mask = torch::zeros({1, padded}, torch::kLong);
  for (int64_t t = 0; t < n; ++t) {
    b.full[0][t] = ids[t];
    b.mask[0][t] = 1;
    if (t + 1 < n) b.targets[0][t] = ids[t + 1];
  }
  return b;
}

// This rank's sequence chunk's log-probs [1, T/sp]; with pp > 1 through the pipeline schedule, over
// --pp-microbatches identical copies that must agree bit for bit.
at::Tensor chunk_logprobs(const Options& o, const cli::LoadedModel& lm, parallel::pipeline::Schedule schedule,
                          const ScoreBatch& b) {
  const parallel::ParallelContext& ctx = lm.ctx;
  auto& m = lm.model;
  auto chunk = [&](const at::Tensor& x) { return parallel::sequence::sequence_chunk(x, ctx.sp).contiguous(); };
  if (ctx.pp_size() > 1) {
    const int mbs = o.pp_microbatches;
    model::StageBatch batch{chunk(b.full.repeat({mbs, 1})), {}, chunk(b.mask.repeat({mbs, 1}))};
    at::Tensor all = model::pipelined_logprobs(*m, batch, chunk(b.targets.repeat({mbs, 1})), mbs,
                                               schedule);  // [M, Tl]
    for (int i = 1; i < mbs; ++i)
      HPCRL_CHECK(at::equal(all[i], all[0]),
                  "micro-batch " << i << " of the pipeline scored the same sequence differently from micro-batch 0: "
                                 << "the pipeline schedule " << o.pp_schedule << " mixed up micro-batches");
    return all.slice(0, 0, 1);
  }
  auto out = m->forward(chunk(b.full), {}, chunk(b.mask));
  return m->token_logprobs(out.hidden, chunk(b.targets), /*with_entropy=*/false).logprobs;
}

// The table (or --json document) rank 0 prints.
void print_scores(const Options& o, const std::vector<int64_t>& ids, const std::vector<double>& logprobs,
                  const io::Tokenizer* tok, const dist::Mesh& mesh) {
  const int64_t n = static_cast<int64_t>(ids.size());
  if (o.json) {
    nlohmann::ordered_json doc;
    doc["ids"] = ids;
    doc["logprobs"] = logprobs;
    std::printf("%s\n", doc.dump().c_str());
    return;
  }
  double total = 0;
  std::vector<std::string> pieces;
  if (tok) pieces = tok->pieces(std::vector<int32_t>(ids.begin(), ids.end()));
  std::printf("%6s %8s %12s %s\n", "pos", "id", "logprob", tok ? "piece" : "");
  for (int64_t t = 0; t < n; ++t) {
    std::string piece = tok ? nlohmann::json(pieces[t]).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                            : "";
    if (t == 0) {
      std::printf("%6d %8lld %12s %s\n", 0, static_cast<long long>(ids[0]), "", piece.c_str());
    } else {
      total += logprobs[t - 1];
      std::printf("%6lld %8lld %12.6f %s\n", static_cast<long long>(t), static_cast<long long>(ids[t]),
                  logprobs[t - 1], piece.c_str());
    }
  }
  if (n > 1)
    std::printf("%lld scored tokens: sum %.6f, mean %.6f, perplexity %.4f (%s)\n", static_cast<long long>(n - 1),
                total, total / (n - 1), std::exp(-total / (n - 1)), mesh.describe().c_str());
}

int run(const Options& o) {
  const dist::WorldInfo& world = dist::init(nullptr, nullptr);
  log::init(world.rank, world.size, cli::global_options().log_level);
  int code = dist::run_or_abort([&] {
    const parallel::pipeline::Schedule schedule = parallel::pipeline::parse_schedule(o.pp_schedule);
    ModelArch arch = model::resolve_model_arch(o.model);
    std::unique_ptr<io::Tokenizer> tok =
        o.text.empty() ? nullptr
                       : cli::command_tokenizer(o.model, o.tokenizer, "--text needs a tokenizer: '" + o.model +
                                                    "' has no tokenizer.json; pass --tokenizer DIR or use --ids");
    std::vector<int64_t> ids = input_ids(o, arch, tok.get());
    const int64_t n = static_cast<int64_t>(ids.size());
    const int sp = o.layout.sp;
    const int64_t padded = (n + sp - 1) / sp * sp;  // Ulysses needs T % sp == 0
    cli::LoadedModel lm = cli::load_command_model({o.model, o.adapter, o.dtype, o.seed}, arch, o.layout, "score", padded);

    torch::NoGradGuard no_grad;
    at::Tensor lp = chunk_logprobs(o, lm, schedule, score_batch(ids, padded));
    lp = parallel::sequence::gather_sequence(lp.contiguous(), lm.ctx.sp)[0].slice(0, 0, n - 1);  // [n - 1]

    if (world.rank != 0) return 0;
    std::vector<double> logprobs(lp.data_ptr<float>(), lp.data_ptr<float>() + lp.numel());
    print_scores(o, ids, logprobs, tok.get(), lm.mesh);
    return 0;
  });
  dist::finalize();
  return code;
}

hpcrl::cli::Registration reg{"score", 55, [](CLI::App& app) {
  static Options o;
  auto* sub = app.add_subcommand("score", "Per-token log-probs of a token sequence under a model");
  sub->add_option("--model", o.model, "HF model directory (config.json + safetensors) or preset:NAME")->required();
  sub->add_option("--adapter", o.adapter, "PEFT LoRA adapter directory to apply on top of --model (unmerged)");
  sub->add_option("--ids", o.ids, "Token ids, comma-separated: 1,2,3");
  sub->add_option("--text", o.text, "Text to tokenize and score (special tokens are added as the tokenizer declares)");
  sub->add_option("--tokenizer", o.tokenizer,
                  "Tokenizer for --text (default: the one the model directory records, byte for presets)");
  sub->add_flag("--json", o.json, "Print {\"ids\": [..], \"logprobs\": [..]} on stdout");
  cli::add_layout_options(sub, o.layout, "Sequence-parallel (Ulysses) size");
  sub->add_option("--pp-schedule", o.pp_schedule, "Pipeline schedule with --pp > 1: 1f1b, gpipe or interleaved")
      ->capture_default_str();
  sub->add_option("--pp-microbatches", o.pp_microbatches,
                  "With --pp > 1: score the sequence as this many identical micro-batches (checked to agree)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--pp-virtual", o.layout.pp_virtual, "Model chunks per pipeline rank (interleaved schedule)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--dtype", o.dtype, "float32 or bfloat16")->capture_default_str();
  sub->add_option("--seed", o.seed, "Initial-weight seed for preset models")->capture_default_str();
  return [] { return run(o); };
}};

}  // namespace
