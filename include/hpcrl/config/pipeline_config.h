// The typed pipeline: what a YAML file (docs/config.md) becomes after
// loading, overrides and validation. Everything later in the program reads
// these structs and never the YAML: values are already range-checked, names
// already resolved (every model/dataset/reward a stage names exists), defaults
// already filled in, inherited values (a stage's eval_every, a role's rollout
// layout, its tokenizer) already resolved. Defaults below are the documented
// ones. `PipelineConfig::pos(key_path)` gives any value's source position, so a
// consumer that finds a problem late (a missing weight file at run time) can
// still name file:line:col.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hpcrl/config/diagnostics.h"
#include "hpcrl/config/enums.h"
#include "hpcrl/config/tool_reply.h"
#include "hpcrl/config/model_arch.h"

namespace hpcrl::config {

// --- run ---------------------------------------------------------------------

// Held-out prompts an evaluation decodes unless run.eval_sampling.prompts says otherwise:
// bounded, so a large eval split (GSM8K's 1,319) does not turn every evaluation into minutes.
inline constexpr int64_t kDefaultEvalPrompts = 256;

// Sampling settings of the periodic held-out evaluation (every stage).
struct EvalSampling {
  int64_t prompts = kDefaultEvalPrompts;  // held-out prompts per evaluation; 0 = the whole eval split
  int64_t n = 1;                 // samples per prompt (pass@1 averaged over n)
  double temperature = 0.0;      // 0 = greedy
  double top_p = 1.0;
  int64_t max_new_tokens = 256;
};

struct RunConfig {
  std::string name;              // default: the pipeline file's stem
  std::string out;               // run directory; default "runs/<name>"
  int64_t seed = 1;
  Device device = Device::cpu;
  DType dtype = DType::float32;
  int64_t checkpoint_every = 0;  // steps between checkpoints inside a stage; 0 = only at stage end
  int64_t keep_last = 2;         // checkpoints kept per stage
  int64_t eval_every = 0;        // steps between evaluations; 0 = only at stage end
  bool eval_before_train = true; // evaluate before each stage's first step
  EvalSampling eval_sampling;
  double comm_timeout_s = 1800;  // communication watchdog: a call waiting longer ends the job; 0 = off
  bool check_memory = true;      // refuse a CPU run whose planned peak exceeds the node's memory (runner/memory_check.h)
};

// --- models ------------------------------------------------------------------

// Degrees of parallelism of one role; dp is derived (ranks / (tp·sp·pp)).
struct ParallelConfig {
  int64_t tp = 1, sp = 1, ep = 1, pp = 1;
  PpSchedule pp_schedule = PpSchedule::_1f1b;
  int64_t pp_virtual = 1;              // virtual stages per rank (interleaved schedule)
  std::vector<int64_t> pp_layers;      // explicit layers per pp stage; empty = balanced
};

struct InitConfig {
  InitKind kind = InitKind::preset;
  std::string preset;                  // kind == preset: built-in architecture, random weights
  std::string path;                    // kind == path: HF model directory (config.json [+ weights])
  std::string from;                    // kind == from: another role, snapshotted when first used
};

struct RolloutConfig {
  ParallelConfig parallel;             // generation layout; unset degrees inherit the training layout
  int64_t max_batch = 64;              // continuous-batching slots per rollout engine
  DecodeStep decode_step = DecodeStep::dynamic;  // rollout::DecodeStep (engine.h)
};

struct OptimConfig {
  double beta1 = 0.9, beta2 = 0.999;   // YAML: betas: [0.9, 0.999]
  double eps = 1e-8;
  int64_t zero = 0;                    // ZeRO stage: 1 shards optimizer state over dp, 2 gradients too
  double bucket_mb = 8;                // MiB per gradient bucket (dp all-reduce, ZeRO-2 reduce-scatter)
  int64_t bucket_bytes() const { return int64_t(bucket_mb * 1024 * 1024); }
};

// Low-rank adapters (LoRA, as PEFT's LoraConfig): the base weights stay frozen,
// each target projection W gains W + (alpha / rank) · B·A with A [rank, in]
// and B [out, rank] trained. rank 0: no adapters.
struct LoraConfig {
  int64_t rank = 0;
  double alpha = 16;                   // the update is scaled by alpha / rank
  double dropout = 0;                  // on the adapter's input, training only
  std::vector<std::string> targets{"q_proj", "v_proj"};  // HF projection names (PEFT's target_modules)
  bool save_merged = false;            // checkpoints also hold merged/: base + adapter as a plain HF model
  bool enabled() const { return rank > 0; }
};

struct ModelConfig {
  std::string name;                    // the role: policy, reference, critic, ...
  InitConfig init;
  ParallelConfig parallel;
  RolloutConfig rollout;
  bool frozen = false;                 // no stage may train it
  Head head = Head::lm;
  bool activation_checkpointing = false;
  OptimConfig optim;
  LoraConfig lora;
  // Resolved: "byte" (built-in byte-level tokenizer) or a directory holding
  // tokenizer.json. Default: the init.path directory, "byte" for presets, the
  // source role's tokenizer for init.from.
  std::string tokenizer;

  // Resolved by validation: the architecture (preset, config.json, or the
  // source role's), absent only when it could not be read (then an error was reported).
  std::optional<ModelArch> arch;
  // Resolved: for init.path, whether weights (model.safetensors or its index) exist.
  bool weights_present = false;
};

// --- rewards -----------------------------------------------------------------

struct RewardConfig {
  std::string name;
  RewardType type = RewardType::verifiable;
  // Tried in order (reward/answer_extract.h's default: explicit markers first,
  // GSM8K's "####" before free-text "the answer is", the last number as fallback).
  std::vector<Extractor> extract{Extractor::boxed, Extractor::answer_tag, Extractor::hash,
                                 Extractor::answer_is, Extractor::last_number};
  double format_bonus = 0.0;           // added when the response is <think>…</think> then an answer
  std::string model;                   // type == model: a role with head: value
  std::vector<std::string> command;    // type == command: argv of the scoring program
  double timeout_s = 30.0;             // type == command: seconds per sample before it is an error
};

// --- data --------------------------------------------------------------------

// The built-in task (io/synthetic.h): column arithmetic with worked solutions.
// A tool multi-turn rollouts may call (top-level `tools:`; docs/tools.md).
struct ToolConfig {
  std::string name;
  ToolType type = ToolType::calculator;
  std::vector<std::string> command;    // type == command: argv of the long-lived program
  std::string description;             // type == command: what the model's template shows
  std::string parameters = "{\"type\": \"object\", \"properties\": {}}";  // type == command: JSON schema (as JSON text)
  int64_t max_reply_bytes = 65536;     // type == command: a longer reply is an error
  int64_t max_restarts = 3;            // type == command: past this many restarts a failure stops the run
};

// A stage's multi-turn settings (its `tools:` key).
struct StageTools {
  std::vector<std::string> use;        // names from the top-level tools; empty = single-turn
  int64_t max_turns = 4;               // calls per trajectory; the next ends it
  int64_t reply_tokens = 256;          // a result is cut to this many tokens
  double call_seconds = 10;            // per call; longer is an error
  ToolErrorAction on_error = ToolErrorAction::observation;  // or end: the row ends, scored 0
  ToolFormat format = ToolFormat::qwen;
  ToolCallBody call = ToolCallBody::json;  // tags: text = the text between the tags is the one tool's argument
  std::string open, close;             // tags: the call's tags (required)
  std::string reply_open = "<result>", reply_close = "</result>";  // tags: around the result
  int64_t concurrency = 64;            // calls running at once per rank
  bool enabled() const { return !use.empty(); }
};

struct SyntheticData {
  SyntheticTask task = SyntheticTask::arithmetic;
  int64_t digits = 2;                  // digits per operand (exactly; leading digit non-zero), 1..9
  int64_t terms = 2;                   // operands per problem, 2..6
  std::string ops = "+";               // "+", "-", "+-" or "*" (products of 2 terms, answered in one line)
  int64_t train = 20000;               // training problems (cycles when fewer exist)
  int64_t eval = 500;                  // held-out problems, distinct and never in train
  int64_t seed = 0;                    // resolved: run.seed when not given
  // Every long_tail_every-th problem (0 = none) with these digits and terms
  // instead: a long-tailed response length (io/synthetic.h).
  struct LongTail {
    int64_t every = 0;
    int64_t digits = 12;
    int64_t terms = 6;
  } long_tail;
  // ops "*": the SFT target calls the calculator in these tags (a stage's
  // `tools: {format: tags}` with call: text) and copies its result; empty = the answer alone.
  struct Calls {
    std::string open, close, reply_open = "<result>", reply_close = "</result>";
    bool enabled() const { return !open.empty(); }
  } calls;
};

// A JSONL file (io/dataset_jsonl.h); the defaults read GSM8K as it is.
struct JsonlData {
  std::string path;                    // training rows
  std::string eval_path;               // held-out rows; "" = hold out `eval_holdout` rows of path
  int64_t eval_holdout = 0;
  std::string prompt = "question";     // key of the prompt text
  std::string answer = "answer";       // key of the answer field
  std::string response;                // key of the SFT target; "" = the whole answer field
  std::string answer_marker = "####";  // gold answer = text after the last marker; "" = whole field
  // Key of a conversation ([{role, content}], a user message then assistant
  // and tool messages; io/dataset_conversation.h) read instead of prompt and
  // response; "" = none. Tool messages are wrapped in tool_reply_open/close.
  std::string messages;
  std::string tool_reply_open = kQwenToolReplyOpen, tool_reply_close = kQwenToolReplyClose;
  ChatTemplate chat_template = ChatTemplate::none;
  std::string system_prompt;
  bool thinking = true;                // qwen3 template: enable_thinking
  int64_t max_prompt_len = 0;          // tokens; longer prompts are dropped (counted); 0 = no limit
  int64_t max_response_len = 0;        // tokens; 0 = no limit
  LongResponse long_response = LongResponse::filter;  // longer SFT targets: dropped or truncated
};

struct DatasetConfig {
  std::string name;
  DataKind kind = DataKind::synthetic;
  SyntheticData synthetic;
  JsonlData jsonl;
  bool shuffle = true;                 // reshuffled each epoch, from run.seed
};

// --- placement ---------------------------------------------------------------

struct RankRange {
  std::string target;                  // a role ("policy") or a role's rollout engine ("policy.rollout")
  int64_t first = 0, last = 0;         // inclusive
  int64_t size() const { return last - first + 1; }
};

struct PlacementConfig {
  PlacementMode mode = PlacementMode::colocated;
  std::vector<RankRange> ranges;       // disaggregated only
};

// --- stages ------------------------------------------------------------------

// Optimizer schedule and batching knobs every training stage shares (flat keys in YAML).
struct TrainHparams {
  double lr = 1e-5;
  int64_t warmup = 0;                  // linear warm-up steps
  LrSchedule schedule = LrSchedule::constant;
  double min_lr_ratio = 0.0;           // floor of linear/cosine decay, as a fraction of lr
  double weight_decay = 0.0;
  double grad_clip = 1.0;              // global grad-norm clip; 0 = off
  int64_t micro_batch = 0;             // sequences per micro-batch per rank; 0 = the whole per-rank batch
  int64_t micro_batch_tokens = 0;      // token budget per micro-batch; 0 = off (micro_batch decides)
  bool packing = false;                // several sequences per row, no padding (algo/training/micro_batches.h)
  // A NaN/inf gradient norm: end the run (stop) or skip that optimizer step
  // (skip_step), ending it after max_consecutive_skips skipped steps in a row.
  OnNonFinite on_nonfinite = OnNonFinite::stop;
  int64_t max_consecutive_skips = 3;
};

struct SamplingConfig {
  int64_t max_new_tokens = 256;
  double temperature = 1.0;            // 0 = greedy
  double top_p = 1.0;
  int64_t top_k = 0;                   // 0 = off
  std::vector<std::string> stop;       // stop strings (EOS ids always stop)
};

struct SftStage {
  std::string model, data;
  int64_t steps = 0;                   // required
  int64_t batch = 0;                   // required; global sequences per step
  TrainHparams train;
  int64_t eval_every = 0;              // resolved from run.eval_every when not given
  double stop_at_accuracy = 0;        // end at the first periodic eval reaching it (0 = off)
  StageTools tools;                    // evaluations multi-turn over these tools (the targets' calls)
};

struct KlConfig {
  double coef = 0.0;
  KlEstimator estimator = KlEstimator::k3;
  bool in_reward = false;              // fold into the reward instead of a loss term
};

struct OverlongConfig {
  bool filter = false;                 // mask truncated responses out of the loss
  double penalty = 0.0;                // DAPO soft overlong penalty at max_new_tokens (≥ 0)
  int64_t buffer = 0;                  // tokens before max_new_tokens where the penalty ramps in
};

// Asynchronous RL (docs/placement.md): generation runs ahead of training by up
// to max_staleness weight versions; 0 = synchronous.
struct AsyncConfig {
  int64_t max_staleness = 0;
  // Responses unfinished at a weight update continue under the new weights
  // (re-prefilled), and the generator keeps its slots full across iterations:
  // an iteration trains on the first `prompts` groups to finish
  // (algo/stages/rollout_stream.h). Generation runs one version ahead; needs
  // max_staleness >= 2 (the oldest token of a response that crossed an update).
  bool partial_rollouts = false;
  // With partial_rollouts: a paused response keeps the keys/values its prompt
  // and tokens got under the weights that computed them, instead of being
  // re-prefilled; only its later tokens see the new weights (docs/placement.md).
  bool keep_stale_cache = false;
};

// What GRPO and PPO share.
struct RlStage {
  std::string policy, reference, data; // reference "" = none
  std::vector<std::string> rewards;    // YAML: reward: name | [names] (summed)
  int64_t iterations = 0;              // required
  int64_t prompts = 0;                 // required; prompts per iteration (global)
  int64_t group = 1;                   // responses per prompt (GRPO default 8)
  SamplingConfig sampling;             // YAML: flat keys max_new_tokens, temperature, top_p, top_k, stop
  TrainHparams train;
  double clip_low = 0.2, clip_high = 0.2;   // YAML: clip: 0.2 | [low, high]
  KlConfig kl;
  LossAgg loss_agg = LossAgg::token_mean;
  PolicyLossKind policy_loss = PolicyLossKind::ppo_clip;  // the surrogate (docs/config.md "RL objectives")
  int64_t epochs = 1;                  // passes over each rollout batch
  int64_t mini_batch = 0;              // sequences per optimizer step; 0 = prompts·group
  bool dynamic_sampling = false;       // drop groups with equal rewards and refill (DAPO)
  OverlongConfig overlong;
  double entropy_coef = 0.0;
  bool recompute_old_logprobs = false; // recompute instead of reusing the rollout's
  AsyncConfig async;                   // needs generation on its own ranks when max_staleness > 0
  double tis_cap = 0;                  // truncated importance weight min(π_old/π_behaviour, C); 0 = off
  // Iterations between trainer forwards that measure the train/inference log-prob
  // mismatch when no old-log-prob pass runs (with one, every iteration); 0 = never.
  int64_t logprob_mismatch_every = 10;
  int64_t eval_every = 0;              // resolved from run.eval_every when not given
  double stop_at_accuracy = 0;        // end at the first periodic eval reaching it (0 = off)
  StageTools tools;                    // multi-turn rollouts (and evaluations) with tools
  // The decoupled objective (behaviour weights in the loss, old log-probs
  // recomputed by the trainer) is on when tis_cap is set, and when generation
  // may lag unless the file asks for the coupled one (recompute_old_logprobs:
  // false beside async: the clip is around the engine's behaviour policy, as in
  // veRL's fully asynchronous trainer). Read after check_rl has resolved it.
  bool decoupled() const { return recompute_old_logprobs && (async.max_staleness > 0 || tis_cap > 0); }
  // Responses generated (and trained on) per iteration: prompts × group.
  int64_t responses() const { return prompts * group; }
};

// The critic-free advantage estimators: A from the G rewards of a prompt's
// group (grpo, rloo) or from token-level returns whitened over the global batch
// (reinforce_pp, reinforce_pp_baseline). docs/config.md "RL objectives" gives the formulas.
struct GrpoStage : RlStage {
  GrpoStage() { group = 8; }
  AdvantageEstimator advantage = AdvantageEstimator::grpo;
  // What the centred rewards are divided by; resolved per estimator when not
  // given: grpo → group (none = Dr.GRPO), rloo → none, reinforce_pp(_baseline) → batch.
  StdNorm std_norm = StdNorm::group;
};

struct PpoStage : RlStage {
  std::string critic;                  // a role with head: value
  double gamma = 1.0, lam = 0.95;
  double value_clip = 0.2;             // 0 = off
  int64_t critic_warmup = 0;           // iterations training only the critic
  double critic_lr = 0.0;              // resolved: the stage lr when not given
};

struct DistillStage {
  std::string teacher, student, data;
  DistillLoss loss = DistillLoss::forward_kl;
  double beta = 0.5;                   // JSD mixture weight
  int64_t top_k = 0;                   // teacher's top-k logits only; 0 = full vocabulary
  bool on_policy = false;              // train on the student's own generations
  bool sequence_level = false;         // teacher generates, student trains with the SFT loss
  SamplingConfig sampling;             // generation when on_policy or sequence_level (no top_k: see above)
  int64_t steps = 0;                   // required
  int64_t batch = 0;                   // required
  TrainHparams train;
  int64_t eval_every = 0;              // resolved from run.eval_every when not given
  double stop_at_accuracy = 0;        // end at the first periodic eval reaching it (0 = off)
};

// A stage's body: one alternative per kind, in StageKind's order (StageConfig::kind()).
using StageBody = std::variant<SftStage, GrpoStage, PpoStage, DistillStage>;

// The facts of each kind, one overload per kind: a kind without one is a
// compile error wherever StageConfig dispatches on its body.
// Roles the stage updates.
std::vector<std::string> trained_roles(const SftStage& s);
std::vector<std::string> trained_roles(const GrpoStage& s);
std::vector<std::string> trained_roles(const PpoStage& s);
std::vector<std::string> trained_roles(const DistillStage& s);
// Roles it only reads (a reference, a teacher), when set.
std::vector<std::string> read_roles(const SftStage& s);
std::vector<std::string> read_roles(const GrpoStage& s);
std::vector<std::string> read_roles(const PpoStage& s);
std::vector<std::string> read_roles(const DistillStage& s);
// The role its held-out evaluations decode with.
const std::string& evaluated_role(const SftStage& s);
const std::string& evaluated_role(const GrpoStage& s);
const std::string& evaluated_role(const PpoStage& s);
const std::string& evaluated_role(const DistillStage& s);
// Steps (sft, distill) or iterations (grpo, ppo), and that unit's name.
int64_t configured_steps(const SftStage& s);
int64_t configured_steps(const GrpoStage& s);
int64_t configured_steps(const PpoStage& s);
int64_t configured_steps(const DistillStage& s);
const char* step_unit(const SftStage& s);
const char* step_unit(const GrpoStage& s);
const char* step_unit(const PpoStage& s);
const char* step_unit(const DistillStage& s);
// Sequences one step / iteration processes (batch, or prompts × group).
int64_t sequences_per_step(const SftStage& s);
int64_t sequences_per_step(const GrpoStage& s);
int64_t sequences_per_step(const PpoStage& s);
int64_t sequences_per_step(const DistillStage& s);

struct StageConfig {
  std::string path;                    // "stages[1].grpo", for messages and pos()
  StageBody body;                      // the kind is the alternative held

  StageKind kind() const;
  // The body as kind T, or null when the stage is another kind.
  template <class T> const T* as() const { return std::get_if<T>(&body); }
  template <class T> T* as() { return std::get_if<T>(&body); }
  // The body as the part GRPO and PPO share; null for other kinds.
  const RlStage* rl() const;
  RlStage* rl();

  // Roles the stage updates / only reads, and the dataset it draws from.
  std::vector<std::string> trained_roles() const;
  std::vector<std::string> used_roles() const;
  const std::string& data() const;
  const std::string& evaluated_role() const;
  int64_t eval_every() const;
  // Steps (sft, distill) or iterations (grpo, ppo) the stage is configured
  // for; stop_at_accuracy may end it sooner. step_unit(): "steps" or "iterations".
  int64_t configured_steps() const;
  const char* step_unit() const;
  int64_t sequences_per_step() const;
};

// A stage body of `kind` with its defaults (the inverse of StageConfig::kind()).
StageBody default_body(StageKind kind);

// --- trace -------------------------------------------------------------------

struct TraceConfig {
  bool chrome = true;                  // trace/rank-NNNNN.json
  bool metrics = true;                 // metrics.jsonl
  bool comm = true;                    // time and bytes of every collective
  bool tensorboard = false;            // tensorboard/events.out.tfevents.*: metrics.jsonl's values as scalars
};

// --- the pipeline ------------------------------------------------------------

struct PipelineConfig {
  std::string file;                    // the pipeline file as given
  RunConfig run;
  std::vector<ModelConfig> models;     // in file order
  std::vector<RewardConfig> rewards;
  std::vector<ToolConfig> tools;
  std::vector<DatasetConfig> data;
  PlacementConfig placement;
  std::vector<StageConfig> stages;
  TraceConfig trace;
  std::map<std::string, SourcePos> positions;  // key path -> where its value was written

  const ModelConfig* find_model(const std::string& role) const;
  const RewardConfig* find_reward(const std::string& name) const;
  const ToolConfig* find_tool(const std::string& name) const;
  const DatasetConfig* find_data(const std::string& name) const;
  // InputError naming the unknown name (validated configs never hit it).
  const ModelConfig& model(const std::string& role) const;
  // Position of `key_path` or of its nearest ancestor that has one (the file itself otherwise).
  SourcePos pos(const std::string& key_path) const;
};

// The LoRA role whose frozen base `mc` is, or "": a role made `init: {from: P}`
// of a LoRA role P, used only as a grpo/ppo reference, never trained, on P's
// ranks and layout, and first used before any stage has trained P (its snapshot
// would then be P's base exactly, since the adapter starts at B = 0). Such a
// reference runs P's model with the adapters bypassed instead of a copy.
std::string lora_base_of(const PipelineConfig& cfg, const ModelConfig& mc);

}  // namespace hpcrl::config
