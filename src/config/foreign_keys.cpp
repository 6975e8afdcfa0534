// The table of other trainers' keys (see foreign_keys.h). A row maps a key only
// where it means what the hpcrl key means, or says how it differs.
#include "config/foreign_keys.h"

#include <algorithm>

#include "hpcrl/util/strings.h"

namespace hpcrl::config {
namespace {

using Scopes = std::vector<std::string>;
const Scopes kRl{"stages[].grpo", "stages[].ppo"};
const Scopes kGen{"stages[].grpo", "stages[].ppo", "stages[].distill"};
const Scopes kTrain{"stages[].sft", "stages[].grpo", "stages[].ppo", "stages[].distill"};
const Scopes kSteps{"stages[].sft", "stages[].distill"};
const Scopes kSft{"stages[].sft"};
const Scopes kGrpo{"stages[].grpo"};
const Scopes kPpo{"stages[].ppo"};
const Scopes kRole{"models.<role>"};
const Scopes kOptim{"models.<role>.optim"};
const Scopes kRollout{"models.<role>.rollout"};
const Scopes kLora{"models.<role>.lora"};
const Scopes kJsonl{"data.<dataset>.jsonl"};
const Scopes kRun{"run"};

const char* kStageKey = "set per stage in hpcrl (sft, grpo, ppo and distill each have one)";
const char* kSamplingKey = "sampling is set per stage in hpcrl (grpo, ppo, and distill when it generates)";

// Lengths, responses per prompt and the KL term.
std::vector<ForeignKey> length_and_kl_rows() {
  return {
      // Lengths.
      {"max_response_length", kGen, "{here}.max_new_tokens", "veRL", ""},
      {"max_response_length", kSft, "data.<dataset>.jsonl.max_response_len", "veRL",
       "an sft stage generates nothing; SFT targets are capped by the dataset's max_response_len"},
      {"max_response_length", kJsonl, "{here}.max_response_len", "veRL",
       "it caps SFT targets (long_response: filter or truncate); generation's cap is the stage's max_new_tokens"},
      {"response_length", kRollout, "stages[].grpo.max_new_tokens", "veRL", kSamplingKey},
      {"generate_max_len", kGen, "{here}.max_new_tokens", "OpenRLHF", ""},
      {"max_new_tokens", kRollout, "stages[].grpo.max_new_tokens", "vLLM / HF generate", kSamplingKey},
      {"max_prompt_length", kTrain, "data.<dataset>.jsonl.max_prompt_len", "veRL / TRL",
       "a dataset key in hpcrl; longer prompts are dropped and counted, not cut"},
      {"max_prompt_length", kJsonl, "{here}.max_prompt_len", "veRL / TRL",
       "longer prompts are dropped and counted, not cut"},
      {"prompt_max_len", kTrain, "data.<dataset>.jsonl.max_prompt_len", "OpenRLHF",
       "a dataset key in hpcrl; longer prompts are dropped and counted, not cut"},
      {"max_length", kTrain, "data.<dataset>.jsonl.max_response_len", "TRL / HF Trainer",
       "TRL's max_length caps prompt + response together; hpcrl caps each part: the dataset's max_prompt_len and "
       "max_response_len (and a stage's max_new_tokens for generation)"},
      {"max_seq_length", kTrain, "data.<dataset>.jsonl.max_response_len", "TRL",
       "it caps prompt + response together; hpcrl caps each part: the dataset's max_prompt_len and max_response_len"},
      // Responses per prompt.
      {"n_samples_per_prompt", kRl, "{here}.group", "OpenRLHF", ""},
      {"num_generations", kRl, "{here}.group", "TRL", ""},
      {"rollout.n", kRole, "stages[].grpo.group", "veRL", "responses per prompt are a grpo/ppo stage key in hpcrl"},
      // KL.
      {"kl_coef", kRl, "{here}.kl.coef", "veRL / OpenRLHF",
       "write `kl: {coef: ...}`; veRL's algorithm.kl_ctrl.kl_coef penalises the reward: add in_reward: true"},
      {"kl_loss_coef", kRl, "{here}.kl.coef", "veRL",
       "write `kl: {coef: ...}` (a KL term in the loss, hpcrl's default)"},
      {"init_kl_coef", kRl, "{here}.kl.coef", "OpenRLHF / TRL",
       "write `kl: {coef: ...}`; hpcrl's coefficient is fixed (no adaptive controller), and these tools put the KL in "
       "the reward: add in_reward: true"},
      {"beta", kRl, "{here}.kl.coef", "TRL",
       "write `kl: {coef: ...}` (TRL's GRPO puts the KL in the loss, as hpcrl does)"},
      {"kl_loss_type", kRl, "{here}.kl.estimator", "veRL",
       "write `kl: {estimator: ...}`: veRL's kl is k1, mse is k2, low_var_kl is k3; abs and full are not built"},
      {"kl_penalty", kRl, "{here}.kl.estimator", "veRL",
       "write `kl: {estimator: ..., in_reward: true}`: veRL's kl is k1, mse is k2, low_var_kl is k3"},
      {"use_kl_loss", kRl, "{here}.kl.in_reward", "veRL",
       "inverted: use_kl_loss: true (the KL in the loss) is hpcrl's default, kl.in_reward: false"},
  };
}

// Learning rate, optimizer, epochs and steps.
std::vector<ForeignKey> optimizer_and_step_rows() {
  return {
      // Learning rate and optimizer.
      {"lr", kOptim, "stages[].grpo.lr", "veRL", std::string("the learning rate is ") + kStageKey},
      {"lr", kRole, "stages[].grpo.lr", "veRL", std::string("the learning rate is ") + kStageKey},
      {"learning_rate", kOptim, "stages[].grpo.lr", "TRL / HF Trainer",
       std::string("the learning rate is ") + kStageKey},
      {"learning_rate", kRole, "stages[].grpo.lr", "TRL / HF Trainer",
       std::string("the learning rate is ") + kStageKey},
      {"learning_rate", kTrain, "{here}.lr", "TRL / HF Trainer", ""},
      {"actor_learning_rate", kTrain, "{here}.lr", "OpenRLHF", ""},
      {"critic_learning_rate", kPpo, "{here}.critic_lr", "OpenRLHF", ""},
      {"weight_decay", kOptim, "stages[].grpo.weight_decay", "veRL", std::string("weight decay is ") + kStageKey},
      {"grad_clip", kOptim, "stages[].grpo.grad_clip", "veRL", std::string("the gradient clip is ") + kStageKey},
      {"max_grad_norm", kTrain, "{here}.grad_clip", "TRL / HF Trainer / OpenRLHF", ""},
      {"warmup_steps", kTrain, "{here}.warmup", "TRL / HF Trainer", ""},
      {"lr_warmup_steps", kTrain, "{here}.warmup", "veRL", ""},
      {"lr_warmup_steps", kOptim, "stages[].grpo.warmup", "veRL", std::string("warm-up is ") + kStageKey},
      {"lr_scheduler_type", kTrain, "{here}.schedule", "TRL / HF Trainer", "constant, linear or cosine"},
      {"warmup_style", kTrain, "{here}.schedule", "veRL", "constant, linear or cosine"},
      {"zero_stage", kRole, "models.<role>.optim.zero", "OpenRLHF / DeepSpeed", "write `optim: {zero: ...}`"},
      {"zero_stage", kOptim, "{here}.zero", "OpenRLHF / DeepSpeed", ""},
      // Epochs and steps.
      {"ppo_epochs", kRl, "{here}.epochs", "veRL", ""},
      {"num_ppo_epochs", kRl, "{here}.epochs", "TRL", ""},
      {"max_epochs", kRl, "{here}.epochs", "OpenRLHF", ""},
      {"num_iterations", kRl, "{here}.epochs", "TRL",
       "TRL's num_iterations is passes over each rollout batch; hpcrl's iterations counts rollout rounds"},
      {"num_train_epochs", kSteps, "{here}.steps", "TRL / HF Trainer",
       "hpcrl counts optimizer steps: steps = epochs × training rows / batch"},
      {"num_train_epochs", kRl, "{here}.iterations", "TRL / HF Trainer",
       "hpcrl counts rollout rounds: iterations = epochs × training prompts / prompts"},
      {"total_epochs", kRl, "{here}.iterations", "veRL",
       "hpcrl counts rollout rounds: iterations = epochs × training prompts / prompts"},
      {"total_training_steps", kRl, "{here}.iterations", "veRL", ""},
      {"max_steps", kSteps, "{here}.steps", "TRL / HF Trainer", ""},
      {"max_steps", kRl, "{here}.iterations", "TRL", "one iteration is one rollout batch and its updates"},
  };
}

// Batch sizes, the surrogate and the advantage.
std::vector<ForeignKey> batch_and_surrogate_rows() {
  return {
      // Batches.
      {"train_batch_size", kSteps, "{here}.batch", "OpenRLHF / DeepSpeed", "sequences per optimizer step, global"},
      {"train_batch_size", kRl, "{here}.prompts", "veRL / OpenRLHF",
       "veRL's counts prompts per iteration, as prompts does; OpenRLHF's counts responses per optimizer step, which is "
       "hpcrl's mini_batch"},
      {"batch_size", kSteps, "{here}.batch", "TRL / HF Trainer", "sequences per optimizer step, summed over ranks"},
      {"rollout_batch_size", kRl, "{here}.prompts", "OpenRLHF", ""},
      {"ppo_mini_batch_size", kRl, "{here}.mini_batch", "veRL",
       "veRL counts prompts (each with rollout.n responses); mini_batch counts responses: "
       "ppo_mini_batch_size × group"},
      {"micro_batch_size", kTrain, "{here}.micro_batch", "veRL / OpenRLHF", "sequences per micro-batch on each rank"},
      {"ppo_micro_batch_size_per_gpu", kTrain, "{here}.micro_batch", "veRL", ""},
      {"micro_train_batch_size", kTrain, "{here}.micro_batch", "OpenRLHF", ""},
      {"per_device_train_batch_size", kTrain, "{here}.micro_batch", "TRL / HF Trainer",
       "the global batch (batch, or prompts·group) is this × gradient_accumulation_steps × data-parallel ranks"},
      {"gradient_accumulation_steps", kTrain, "{here}.micro_batch", "TRL / HF Trainer",
       "hpcrl derives accumulation: each rank's share of the batch runs in micro-batches of micro_batch sequences "
       "(accumulation steps = batch / (dp · micro_batch))"},
      // The surrogate and the advantage.
      {"clip_range", kRl, "{here}.clip", "TRL", ""},
      {"cliprange", kRl, "{here}.clip", "TRL", ""},
      {"eps_clip", kRl, "{here}.clip", "OpenRLHF", ""},
      {"clip_ratio", kRl, "{here}.clip", "veRL", ""},
      {"clip_ratio_low", kRl, "{here}.clip", "veRL", "write clip: [low, high]"},
      {"clip_ratio_high", kRl, "{here}.clip", "veRL", "write clip: [low, high]"},
      {"epsilon", kRl, "{here}.clip", "TRL", ""},
      {"epsilon_high", kRl, "{here}.clip", "TRL", "write clip: [epsilon, epsilon_high]"},
      {"cliprange_value", kPpo, "{here}.value_clip", "TRL / veRL", ""},
      {"entropy_coeff", kRl, "{here}.entropy_coef", "veRL", ""},
      {"lambd", kPpo, "{here}.lam", "OpenRLHF", ""},
      {"adv_estimator", kGrpo, "{here}.advantage", "veRL",
       "reinforce_plus_plus is reinforce_pp, reinforce_plus_plus_baseline is reinforce_pp_baseline; "
       "gae is the ppo stage"},
      {"advantage_estimator", kGrpo, "{here}.advantage", "OpenRLHF",
       "reinforce++ is reinforce_pp, reinforce++_baseline is reinforce_pp_baseline; gae is the ppo stage"},
      {"norm_adv_by_std_in_grpo", kGrpo, "{here}.std_norm", "veRL", "true is group, false is none"},
      {"scale_rewards", kGrpo, "{here}.std_norm", "TRL", "true (group) is group, batch is batch, false (none) is none"},
      {"loss_agg_mode", kRl, "{here}.loss_agg", "veRL",
       "written with _: token_mean, seq_mean_token_sum, seq_mean_token_mean"},
  };
}

// Sampling outside the stages, roles and run-wide settings.
std::vector<ForeignKey> sampling_role_and_run_rows() {
  return {
      // Sampling in other places.
      {"temperature", kRollout, "stages[].grpo.temperature", "veRL", kSamplingKey},
      {"temperature", kRole, "stages[].grpo.temperature", "veRL", kSamplingKey},
      {"temperature", kSft, "run.eval_sampling.temperature", "TRL / HF Trainer",
       "an sft stage does not sample; its held-out evaluations sample with run.eval_sampling"},
      {"temperature", kRun, "run.eval_sampling.temperature", "TRL / HF Trainer",
       "for evaluation; rollouts sample with each grpo/ppo stage's temperature"},
      {"top_p", kRollout, "stages[].grpo.top_p", "veRL", kSamplingKey},
      {"top_k", kRollout, "stages[].grpo.top_k", "veRL", kSamplingKey},
      // Roles.
      {"path", kRole, "models.<role>.init.path", "veRL", "write `init: {path: DIR}`"},
      {"pretrain", kRole, "models.<role>.init.path", "OpenRLHF", "write `init: {path: DIR}`"},
      {"model_name_or_path", kRole, "models.<role>.init.path", "TRL / HF Trainer", "write `init: {path: DIR}`"},
      {"gradient_checkpointing", kRole, "{here}.activation_checkpointing", "TRL / HF Trainer / OpenRLHF", ""},
      {"enable_gradient_checkpointing", kRole, "{here}.activation_checkpointing", "veRL", ""},
      {"gradient_checkpointing", kTrain, "models.<role>.activation_checkpointing", "TRL / HF Trainer",
       "a role key in hpcrl"},
      {"tensor_model_parallel_size", kRollout, "models.<role>.rollout.parallel.tp", "veRL",
       "write `parallel: {tp: ...}`"},
      {"tensor_parallel_size", kRole, "models.<role>.parallel.tp", "veRL / vLLM", "write `parallel: {tp: ...}`"},
      {"ulysses_sequence_parallel_size", kRole, "models.<role>.parallel.sp", "veRL", "write `parallel: {sp: ...}`"},
      {"lora_rank", kRole, "models.<role>.lora.rank", "veRL / OpenRLHF", "write `lora: {rank: ...}`"},
      {"lora_alpha", kRole, "models.<role>.lora.alpha", "veRL / OpenRLHF", "write `lora: {rank: ..., alpha: ...}`"},
      {"target_modules", kRole, "models.<role>.lora.targets", "veRL / PEFT",
       "write `lora: {rank: ..., targets: [...]}`"},
      {"r", kLora, "{here}.rank", "PEFT", ""},
      {"lora_alpha", kLora, "{here}.alpha", "PEFT", ""},
      {"lora_dropout", kLora, "{here}.dropout", "PEFT", ""},
      {"target_modules", kLora, "{here}.targets", "PEFT", ""},
      // Run-wide settings.
      {"seed", kTrain, "run.seed", "TRL / HF Trainer", "one seed for the whole run"},
      {"bf16", kRun, "run.dtype", "TRL / HF Trainer / OpenRLHF", "write dtype: bfloat16"},
      {"bf16", {""}, "run.dtype", "TRL / HF Trainer / OpenRLHF", "write `run: {dtype: bfloat16}`"},
      {"eval_steps", kTrain, "{here}.eval_every", "TRL / HF Trainer", ""},
      {"test_freq", kTrain, "{here}.eval_every", "veRL", ""},
      {"test_freq", kRun, "{here}.eval_every", "veRL", ""},
      {"save_steps", kTrain, "run.checkpoint_every", "TRL / HF Trainer", "one checkpoint interval for the run"},
      {"save_freq", kRun, "{here}.checkpoint_every", "veRL", ""},
      {"save_steps", kRun, "{here}.checkpoint_every", "TRL / HF Trainer", ""},
      {"save_total_limit", kRun, "{here}.keep_last", "TRL / HF Trainer", "checkpoints kept per stage"},
  };
}

// The rows in order: docs/config.md's table lists them so, and a hint takes the first row that matches.
std::vector<ForeignKey> make_table() {
  std::vector<ForeignKey> table;
  for (auto rows : {length_and_kl_rows(), optimizer_and_step_rows(), batch_and_surrogate_rows(),
                    sampling_role_and_run_rows()})
    table.insert(table.end(), rows.begin(), rows.end());
  return table;
}

// `path` split at the dots that separate keys ("stages[1].grpo" -> stages[1], grpo).
std::vector<std::string> components(const std::string& path) {
  return path.empty() ? std::vector<std::string>{} : str::split(path, '.');
}

}  // namespace

const std::vector<ForeignKey>& foreign_keys() {
  static const std::vector<ForeignKey> table = make_table();
  return table;
}

std::string schema_path(const std::string& path) {
  std::vector<std::string> parts = components(path);
  for (auto& p : parts)
    if (auto open = p.find('['); open != std::string::npos) p = p.substr(0, open) + "[]";
  if (parts.size() > 1) {
    if (parts[0] == "models") parts[1] = "<role>";
    if (parts[0] == "data") parts[1] = "<dataset>";
    if (parts[0] == "rewards") parts[1] = "<reward>";
  }
  return str::join(parts, ".");
}

std::string foreign_keys_markdown() {
  std::string out = "| tool | their key | where | hpcrl key | how it differs |\n|---|---|---|---|---|\n";
  for (const auto& e : foreign_keys()) {
    std::vector<std::string> where;
    for (const auto& s : e.scopes) where.push_back(s.empty() ? "top level" : "`" + s + "`");
    const bool here = str::starts_with(e.target, "{here}.");
    const std::string target = here ? "`" + e.target.substr(7) + "` in the same mapping" : "`" + e.target + "`";
    out += "| " + e.tools + " | `" + e.key + "` | " + str::join(where, ", ") + " | " + target + " | " +
           (e.note.empty() ? "the same" : e.note) + " |\n";
  }
  return out;
}

std::string target_in(const ForeignKey& entry, const std::string& scope) {
  const std::string here = "{here}";
  if (!str::starts_with(entry.target, here)) return entry.target;
  return scope.empty() ? entry.target.substr(here.size() + 1) : scope + entry.target.substr(here.size());
}

namespace {
// `target` (a schema path) with the name the unknown key's own path gives its
// placeholder: models.<role>.x, for a key under models.policy, is models.policy.x.
std::string shown_target(const std::string& target, const std::string& path) {
  std::vector<std::string> t = components(target), p = components(path);
  if (t.size() > 1 && p.size() > 1 && t[0] == p[0] && schema_path(p[0] + "." + p[1]) == t[0] + "." + t[1]) t[1] = p[1];
  return str::join(t, ".");
}

// Whether `key` ("n" or "rollout.n") ends the schema path `normal`; `scope` gets what is before it.
bool ends_with_key(const std::string& normal, const std::string& key, std::string& scope) {
  if (normal == key) return scope.clear(), true;
  if (!str::ends_with(normal, "." + key)) return false;
  scope = normal.substr(0, normal.size() - key.size() - 1);
  return true;
}
}  // namespace

std::optional<ForeignKeyHint> foreign_key_hint(const std::string& path) {
  const std::string normal = schema_path(path);
  for (const auto& e : foreign_keys()) {
    std::string scope;
    if (!ends_with_key(normal, e.key, scope)) continue;
    if (std::find(e.scopes.begin(), e.scopes.end(), scope) == e.scopes.end()) continue;
    // The mapping as written ("stages[1].grpo"): the first components of `path`, as many as `scope` has.
    const size_t depth = components(scope).size();
    const std::vector<std::string> parts = components(path);
    const std::string written_scope = str::join({parts.begin(), parts.begin() + depth}, ".");
    const bool here = str::starts_with(e.target, "{here}.");
    const std::string rest = here ? e.target.substr(7) : "";
    const std::string shown = !here ? shown_target(e.target, path)
                                    : written_scope.empty() ? rest : written_scope + "." + rest;
    ForeignKeyHint hint;
    const bool beside = here && rest.find('.') == std::string::npos && e.key.find('.') == std::string::npos;
    if (beside) hint.sibling = rest;
    hint.fix = "the " + e.tools + " key " + e.key + " is hpcrl's " + shown + (e.note.empty() ? "" : "; " + e.note);
    if (beside) hint.fix = "did you mean '" + rest + "'? (" + hint.fix + ")";
    return hint;
  }
  return std::nullopt;
}

}  // namespace hpcrl::config
