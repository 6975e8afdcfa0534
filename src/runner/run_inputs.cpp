// Inputs of a run, loaded and checked up front (see run_inputs.h).
#include "hpcrl/runner/run_inputs.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>

#include "hpcrl/algo/stages/prompting.h"
#include "hpcrl/io/safetensors_dir.h"
#include "hpcrl/io/tokenizer.h"
#include "hpcrl/runner/data_loader.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::runner {
namespace {
namespace stdfs = std::filesystem;

// How a stage uses its rows, for the length check: the roles that read them,
// and whether a row's tokens are its prompt and response (supervised) or its
// prompt and up to `new_tokens` generated ones.
struct RowUse {
  std::vector<std::string> roles;
  bool supervised = true;
  int64_t new_tokens = 0;
  std::string new_tokens_key;  // the key that sets new_tokens, for the fix
};

RowUse train_use(const config::SftStage& s, const std::string&) { return {{s.model}, true, 0, ""}; }

// `critic`: PPO's, null for GRPO.
RowUse rl_use(const config::RlStage& s, const std::string* critic, const std::string& path) {
  RowUse u{{s.policy}, false, s.sampling.max_new_tokens, path + ".max_new_tokens"};
  if (!s.reference.empty()) u.roles.push_back(s.reference);
  if (critic) u.roles.push_back(*critic);
  return u;
}

RowUse train_use(const config::GrpoStage& s, const std::string& path) { return rl_use(s, nullptr, path); }
RowUse train_use(const config::PpoStage& s, const std::string& path) { return rl_use(s, &s.critic, path); }

RowUse train_use(const config::DistillStage& d, const std::string& path) {
  if (d.on_policy || d.sequence_level)
    return {{d.student, d.teacher}, false, d.sampling.max_new_tokens, path + ".max_new_tokens"};
  return {{d.student, d.teacher}, true, 0, ""};
}

RowUse train_use(const config::StageConfig& s) {
  return std::visit([&](const auto& body) { return train_use(body, s.path); }, s.body);
}

// Held-out rows are generated from (run.eval_sampling) by the stage's trained
// or generating role; SFT and distillation also score their responses (the
// stages whose training rows are supervised: SFT, and distillation off-policy).
RowUse eval_use(const config::StageConfig& s, const config::PipelineConfig& cfg) {
  RowUse u = train_use(s);
  u.roles.resize(1);
  u.new_tokens = cfg.run.eval_sampling.max_new_tokens;
  u.new_tokens_key = "run.eval_sampling.max_new_tokens";
  return u;
}

// The longest any token can be in bytes: a byte-level piece is at least as
// long as the bytes it stands for, so a text of more bytes than this times
// the context cannot fit whatever it encodes to — found without tokenizing it.
size_t max_token_bytes(const io::Tokenizer& tok) {
  size_t longest = 1;
  for (int64_t id = 0; id < tok.vocab_size(); ++id)
    longest = std::max(longest, tok.id_to_token(static_cast<int32_t>(id)).size());
  return longest;
}

std::string row_place(const io::Dataset& ds, size_t index) {
  const io::Example& ex = ds[index];
  return ex.line > 0 ? ds.name + ":" + std::to_string(ex.line) : ds.name + " example " + std::to_string(index + 1);
}

// Where the user can limit row lengths: a JSONL dataset's keys.
std::string limit_fix(const config::DatasetConfig& data, bool supervised) {
  if (data.kind != config::DataKind::jsonl) return "use a model with a longer context";
  const std::string key = "data." + data.name + ".jsonl.";
  return supervised ? "shorten or remove the row, or set " + key + "max_prompt_len / " + key +
                          "max_response_len (longer rows are dropped and counted; long_response: truncate cuts the "
                          "response instead)"
                    : "shorten or remove the row, or set " + key + "max_prompt_len (longer prompts are dropped and "
                          "counted)";
}

// The role among `roles` with the smallest context (null when none has a known architecture).
const config::ModelConfig* tightest_role(const config::PipelineConfig& cfg, const std::vector<std::string>& roles) {
  const config::ModelConfig* tightest = nullptr;
  for (const auto& r : roles) {
    const auto* mc = cfg.find_model(r);
    if (mc && mc->arch && (!tightest || mc->arch->max_position_embeddings < tightest->arch->max_position_embeddings))
      tightest = mc;
  }
  return tightest;
}

// What is wrong with row `i` against `context` ("" when it fits). A text of
// more than `byte_bound` bytes cannot fit and is not tokenized at all.
std::string row_problem(const config::StageConfig& stage, const RowUse& use, const config::DatasetConfig& data,
                        const io::Dataset& ds, size_t i, const algo::PromptBuilder& prompts,
                        const config::ModelConfig& role, size_t byte_bound) {
  const io::Example& ex = ds[i];
  const int64_t context = role.arch->max_position_embeddings;
  const std::string holds = "the " + std::to_string(context) + " tokens model '" + role.name +
                            "' holds (max_position_embeddings)";
  const std::string prompt_text = prompts.prompt_text(ex);
  const size_t bytes = prompt_text.size() + (use.supervised ? ex.response.size() : 0);
  if (bytes > byte_bound)
    return row_place(ds, i) + ": this row is " + std::to_string(bytes) + " bytes, more than " + holds +
           " can take at " + std::to_string(byte_bound / static_cast<size_t>(context)) +
           " bytes per token at most; " + limit_fix(data, use.supervised);
  const int64_t p = static_cast<int64_t>(prompts.prompt_ids(ex).size());
  if (use.supervised) {
    const int64_t r = static_cast<int64_t>(prompts.response_ids(ex).size());
    if (p + r > context)
      return row_place(ds, i) + ": this row is " + std::to_string(p + r) + " tokens (prompt " + std::to_string(p) +
             " + response " + std::to_string(r) + " with its end token), more than " + holds + ", and " + stage.path +
             " reads whole rows; " + limit_fix(data, true);
  }
  if (use.new_tokens > 0 && p + use.new_tokens > context)
    return row_place(ds, i) + ": this prompt is " + std::to_string(p) + " tokens; with " + use.new_tokens_key +
           " = " + std::to_string(use.new_tokens) + " (" + stage.path + ") a sequence may reach " +
           std::to_string(p + use.new_tokens) + " tokens, more than " + holds + "; " + limit_fix(data, false) +
           ", or lower " + use.new_tokens_key;
  return "";
}

// Checks every row of `ds` against the smallest context among `use.roles`;
// the error names the first row that does not fit and counts the others.
void check_lengths(const config::PipelineConfig& cfg, const config::StageConfig& stage, const RowUse& use,
                   const config::DatasetConfig& data, const io::Dataset& ds, const io::Tokenizer& tok) {
  const config::ModelConfig* role = tightest_role(cfg, use.roles);
  if (!role) return;
  const size_t byte_bound = max_token_bytes(tok) * static_cast<size_t>(role->arch->max_position_embeddings);
  algo::PromptBuilder prompts(tok, &data);
  std::string first;
  std::vector<std::string> others;
  for (size_t i = 0; i < ds.size(); ++i) {
    std::string problem = row_problem(stage, use, data, ds, i, prompts, *role, byte_bound);
    if (problem.empty()) continue;
    if (first.empty()) first = std::move(problem);
    else others.push_back(ds[i].line > 0 ? std::to_string(ds[i].line) : std::to_string(i + 1));
  }
  if (first.empty()) return;
  if (!others.empty()) {
    std::vector<std::string> shown(others.begin(), others.begin() + std::min<size_t>(others.size(), 5));
    first += " (" + std::to_string(others.size()) + " more row(s) of " + ds.name + " do not fit either: " +
             (ds[0].line > 0 ? "lines " : "examples ") + str::join(shown, ", ") + (others.size() > 5 ? ", ..." : "") +
             ")";
  }
  throw InputError(first);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(std::to_string(d));
  return "[" + str::join(dims, ", ") + "]";
}

bool tokenizer_available(const std::string& spec) {
  return spec.empty() || spec == "byte" || stdfs::exists(stdfs::path(spec) / "tokenizer.json");
}

// A token id at or past the model's vocab_size would index past the embedding (a LibTorch
// "index out of range" mid-run): the tokenizer must not have more ids than the model has rows.
void check_tokenizer_fits(const config::PipelineConfig& cfg, const config::ModelConfig& mc, const io::Tokenizer& tok) {
  // A value-head role (critic, reward model) reads the policy's token ids: the reward and
  // critic checks compare its vocabulary with the policy's instead.
  if (!mc.arch || mc.head != config::Head::lm || tok.vocab_size() <= mc.arch->vocab_size) return;
  const config::SourcePos at = cfg.pos("models." + mc.name);
  throw InputError((at.line > 0 ? at.str() + ": " : std::string()) + "models." + mc.name + ": its tokenizer (" +
                   (mc.tokenizer.empty() ? std::string("byte") : mc.tokenizer) + ") has " +
                   std::to_string(tok.vocab_size()) + " ids but the model's vocabulary has " +
                   std::to_string(mc.arch->vocab_size) + " rows (vocab_size); ids from " +
                   std::to_string(mc.arch->vocab_size) +
                   " up would index past the embedding. Use the tokenizer the model was trained with, or a model "
                   "whose vocab_size is at least " + std::to_string(tok.vocab_size()));
}
}  // namespace

RunInputs load_run_inputs(const config::PipelineConfig& cfg, bool lengths_optional) {
  RunInputs in;
  std::map<std::string, std::shared_ptr<io::Tokenizer>> tokenizers;  // by spec: each loaded once
  auto tokenizer_of = [&](const std::string& role) -> std::shared_ptr<io::Tokenizer> {
    const std::string& spec = cfg.model(role).tokenizer;
    if (lengths_optional && !tokenizer_available(spec)) return nullptr;
    auto& t = tokenizers[spec];
    if (!t) t = io::load_tokenizer(io::configured_tokenizer_spec(spec));
    return t;
  };
  for (const auto& stage : cfg.stages) {
    const config::DatasetConfig& data = *cfg.find_data(stage.data());
    const RowUse train = train_use(stage), eval = eval_use(stage, cfg);
    auto tok = tokenizer_of(train.roles.front());
    auto it = in.data.find(data.name);
    if (it == in.data.end()) {
      if (tok) {
        // Length limits count tokens of the reading role's tokenizer (the roles of a pipeline share one vocabulary).
        it = in.data.emplace(data.name, load_data_splits(data, cfg.run, *tok)).first;
      } else {
        // No tokenizer to count with (validate, config.json only): every row is read, no token limit applied.
        config::DatasetConfig unlimited = data;
        unlimited.jsonl.max_prompt_len = unlimited.jsonl.max_response_len = 0;
        auto bytes = io::load_tokenizer(io::configured_tokenizer_spec("byte"));
        it = in.data.emplace(data.name, load_data_splits(unlimited, cfg.run, *bytes)).first;
      }
    }
    if (!tok) {
      spdlog::warn("{}: no tokenizer.json in '{}' (role '{}'): the rows of data '{}' are read, their lengths not "
                   "checked",
                   stage.path, cfg.model(train.roles.front()).tokenizer, train.roles.front(), data.name);
      continue;
    }
    check_lengths(cfg, stage, train, data, it->second.train, *tok);
    check_lengths(cfg, stage, eval, data, it->second.eval, *tok);
  }
  for (const auto& mc : cfg.models)
    if (auto tok = tokenizer_of(mc.name)) check_tokenizer_fits(cfg, mc, *tok);
  return in;
}

void check_weight_files(const config::PipelineConfig& cfg) {
  for (const auto& mc : cfg.models) {
    if (mc.init.kind != config::InitKind::path || !mc.weights_present || !mc.arch) continue;
    io::SafetensorsDir dir(mc.init.path);  // InputError naming the file on any damage
    for (const auto& name : dir.names()) {   // from the headers: no tensor is read
      const io::Dtype d = dir.info(name).dtype;
      HPCRL_CHECK_INPUT(d == io::Dtype::F16 || d == io::Dtype::BF16 || d == io::Dtype::F32 || d == io::Dtype::F64,
                        dir.source() << ": tensor '" << name << "' is stored as " << io::dtype_name(d)
                                     << ", not a floating type; model weights are F32, BF16, F16 or F64 (re-save "
                                        "the checkpoint with floating-point weights)");
    }
    const std::string embed = "model.embed_tokens.weight";
    if (!dir.contains(embed)) continue;  // the full check (every tensor) is run's, when the model is built
    const auto& shape = dir.info(embed).shape;
    const std::vector<int64_t> want{mc.arch->vocab_size, mc.arch->hidden_size};
    HPCRL_CHECK_INPUT(shape == want, dir.source() << ": tensor '" << embed << "' has shape " << shape_text(shape)
                                                  << " but config.json gives vocab_size " << want[0]
                                                  << " and hidden_size " << want[1]
                                                  << "; the weights and config.json do not belong together");
  }
}

}  // namespace hpcrl::runner
