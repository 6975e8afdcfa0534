// The rollout engine: batched generation with a KV cache for GRPO/PPO rollouts,
// evaluation and `hpcrl generate`. Sequences of different lengths share a batch
// of slots in a preallocated cache (kv_slots.h: positions and masks per row, no
// padding seen by any real token); the n samples of a prompt share its
// prefill; every live row's token is chosen in one batched call on the
// model's device, each from a random number keyed by (seed, prompt, sample,
// token) (sampling.h), so what a sample produces does not depend on which other
// sequences share the batch; EOS and max_new_tokens are checked on the device,
// and the host reads the tokens every host_sync_interval steps; with
// continuous batching a finished sequence's slot takes the next waiting one.
// The log-prob returned for each token is the one the training forward computes
// for the same sequence (same weights and modules), within fp32 rounding.
//
// A call may pause (Engine::run): once the asked number of prompts have all
// their samples done, at a host read, the unfinished samples come back with
// their tokens and log-probs, and a later call continues them by prefilling
// prompt + tokens afresh under the weights of that moment. Partial rollouts
// across a weight update (algo/stages/rollout_stream.h) are built on it.
//
// The engine runs on the trainer's model object itself (colocated, same layout:
// no weight sync), reading its current weights at the start of every generate()
// call (a float32 model on the CPU has them packed into the engine's own copy,
// whose memory the engine keeps from call to call: slot_projections.h). Under tp every rank of the tp group calls generate() with the
// same prompts; sp ranks decode independently (like dp ranks); with expert
// parallelism the ranks of an ep group step together (idle ranks run an empty
// step) because every MoE layer is a collective over ep.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/rollout/kv_slots.h"
#include "hpcrl/rollout/turns.h"

namespace hpcrl::io {
class Tokenizer;
}

namespace hpcrl::rollout {

class SlotProjections;
class DecodeWorkspace;

struct SamplingParams {
  double temperature = 1.0;   // 0 = greedy (argmax)
  double top_p = 1.0;         // nucleus; 1 = off
  int64_t top_k = 0;          // 0 = off
  double min_p = 0.0;         // keep tokens with p >= min_p · p(most likely); 0 = off
  int64_t max_new_tokens = 256;
  std::vector<std::string> stop;     // stop strings (need a tokenizer); the stop string is kept in the text
  std::vector<int32_t> eos_ids;      // any of these ends a sample (the EOS token is part of the response)
  uint64_t seed = 0;                 // token t of sample (p, i) draws Philox(seed; prompt_offset + p, i, t)
  int64_t prompt_offset = 0;         // global index of prompts[0]: data-parallel ranks pass their slice's
                                     // offset so every sample's randomness is independent of the layout
  // When set (one per prompt): prompt p draws as prompt_keys[p] instead of prompt_offset + p, so a
  // sample continued in a later call (Engine::run) keeps its draws whatever the call's prompt list.
  std::vector<int64_t> prompt_keys;
  // Sample::logprobs of the sampling distribution, softmax(logits / temperature), as the RL
  // stages train it (veRL, TRL); false: of the model's own distribution.
  bool logprobs_at_temperature = false;
};

// How a decode step runs (docs/rollout.md, "Decode steps"):
//   dynamic  shaped by the live rows and their longest cache, tokens drawn with
//            keys the host computes every step; the CPU's fastest step;
//   fixed    the same computation as a fixed-shape function of device buffers
//            alone: rows padded to a bucket (1, 2, 4, … max_batch), keys read
//            up to a cache-length bucket, uniforms read from a per-row table,
//            no host read inside (fixed_decode_step.h); run eagerly;
//   graphs   the fixed step captured as one CUDA graph per (rows, keys) bucket
//            at its second use and replayed from then on (CUDA builds, on a
//            CUDA model; the step runs eagerly where a graph cannot hold it:
//            tp > 1, experts). The engine keeps its buffers and graphs for
//            the next call of the same layout while the weights stay where
//            they were (src/rollout/decode_workspace.h).
enum class DecodeStep { dynamic, fixed, graphs };

struct EngineOptions {
  int64_t max_batch = 64;            // sequences decoded together (slots)
  bool continuous_batching = true;   // refill finished slots from the queue
  // Decode steps between the host's reads of the generated tokens (EOS and
  // max_new_tokens are checked on the device every step; stop strings, retiring
  // and refilling wait for a read, and a row that ended keeps being computed
  // until then, its extra tokens dropped). 0: 1 on the CPU, where the read
  // costs nothing, 8 on a GPU, where each read is a blocking device sync.
  int64_t host_sync_interval = 0;
  // Attention scores one prefill forward may hold (64 Mi float32 = 256 MiB):
  // long prompts are prefilled in chunks of positions that fit it (chunked
  // prefill), at most SlotForward::kPrefillTokens prompt tokens per forward.
  int64_t prefill_attention_elements = int64_t(1) << 26;
  DecodeStep decode_step = DecodeStep::dynamic;
  // Called on rank-local progress: (finished sequences, all sequences of this call).
  std::function<void(int64_t, int64_t)> progress;
  // Polled before every iteration (prefill/decode step); true abandons the call, which then
  // returns the samples finished so far with GenerateStats::abandoned set. Ranks that step
  // together (a tp group, an ep lockstep group) must get the same answer at the same
  // iteration: the caller agrees it over them (algo/stages/stop_inside.h).
  std::function<bool()> abandon;
};

struct Sample {
  int64_t prompt_index = 0;
  int64_t sample_index = 0;
  std::vector<int32_t> tokens;       // generated ids (EOS included when it stopped on one)
  std::vector<float> logprobs;       // log p(token), one per token (see logprobs_at_temperature); 0 for inserted ones
  // Per token: 1 sampled by the model, 0 inserted by a multi-turn call (a tool's
  // reply, turns.h). Empty: every token was sampled (a single-turn sample).
  std::vector<uint8_t> sampled;
  std::string finish_reason;         // "stop" (EOS or stop string) | "length" | a TurnReply's reason
  int64_t turns = 0;                 // tool calls the sample made (replies inserted or ending it)
  double turn_reward = 0;            // the rewards its turns' replies carried (an environment's; TurnReply::reward)
  // A sample paused with its cache kept (GenerationCall::keep_paused_cache):
  // the keys/values of its prompt and every token but the last, as the weights
  // of their time computed them. Null: a continuation prefills prompt + tokens.
  std::shared_ptr<const SlotCache> cache;

  bool was_sampled(size_t t) const { return sampled.empty() || sampled[t] != 0; }
  int64_t sampled_count() const;     // tokens the model sampled
};

// One call of Engine::run: the samples to generate, each fresh (no tokens yet)
// or paused part-way by an earlier call. A paused sample continues after its
// tokens: its prompt and those tokens are prefilled afresh under the model's
// current weights (a re-prefill, so its cache is what a fresh forward under the
// new weights computes) and its next token draws at step tokens.size(), so a
// sample continued across calls draws what it would have drawn in one call.
// Fresh samples of one prompt share its prefill, as in generate().
struct GenerationCall {
  std::vector<Sample> samples;       // prompt_index into the call's prompts; finish_reason empty
  // > 0: the call pauses at the first host sync where this many prompts have
  // every sample of theirs in this call finished; the rest come back paused.
  // The ranks of an ep lockstep group agree on the pause, so each must make a
  // pausing call (> 0) or none does.
  int64_t pause_after_groups = 0;
  // Multi-turn: a row whose tokens end a turn waits for the handler's reply
  // while the others decode (turns.h); null = single-turn. At a pause, rows
  // waiting for a reply take it first (appended to their tokens, marked
  // inserted) and pause with the others. The ranks of a tp group take a reply once
  // every one of them has it; the ranks of an ep lockstep group prefill their
  // own replies, as many forwards each as the rank with the most (idle ones
  // run empty steps), and must all make a multi-turn call or none (InputError).
  TurnHandler* turns = nullptr;
  // At a pause, each decoding row takes its keys/values along (Sample::cache),
  // and a later call continues it from them with no prefill: only tokens
  // after the pause see that call's weights, so after a weight update the
  // kept cache is stale (docs/placement.md "Partial rollouts"). A row waiting
  // for a tool's reply at the pause has no cache kept (its reply is not cached
  // yet) and is prefilled afresh.
  bool keep_paused_cache = false;

  // n fresh samples of each of `prompts` prompts, ordered by (prompt, sample).
  static GenerationCall fresh(int64_t prompts, int64_t n, TurnHandler* turns = nullptr);
};

struct GenerationResult {
  std::vector<Sample> finished;  // ordered by (prompt_index, sample_index)
  std::vector<Sample> paused;    // unfinished (finish_reason empty), same order: pass them to a later call
};

struct GenerateStats {
  int64_t prompt_tokens = 0;
  int64_t resumed_tokens = 0;    // generated tokens of paused samples prefilled again (in prompt_tokens too)
  int64_t cached_resumes = 0;    // paused samples continued from their kept cache (no prefill)
  int64_t generated_tokens = 0;
  int64_t forward_calls = 0;     // prefill and decode steps (idle ep steps not counted)
  int64_t decode_steps = 0;
  int64_t host_syncs = 0;        // reads of the generated tokens by the host (device_rows.h)
  int64_t prefill_forwards = 0;  // prefill chunks run (each a forward; counted in forward_calls)
  int64_t cache_bytes = 0;       // the preallocated KV slots
  double prefill_seconds = 0;    // prefill forwards + choosing their first tokens (the rollout/prefill spans)
  double decode_seconds = 0;     // decode steps + choosing their tokens (the rollout/decode spans)
  int64_t graph_captures = 0;    // graphs captured, of decode steps and prefills (DecodeStep::graphs)
  int64_t graph_replays = 0;     // decode steps and prefills run by replaying a graph
  int64_t fixed_prefills = 0;    // admissions prefilled by the fixed prefill (DecodeStep::fixed, ::graphs),
                                 // the rest by the eager, chunked one (a padded shape past one chunk)
  bool reused_buffers = false;   // the call ran on the last call's KV slots and graphs (DecodeStep::graphs)
  int64_t turn_calls = 0;        // turns ended (calls started, turns.h)
  int64_t reply_tokens = 0;      // tokens inserted after turns (each prefilled into its row's cache)
  int64_t decode_steps_during_calls = 0;  // decode steps taken while a call was running
  double call_wait_seconds = 0;  // time the engine waited for replies with no row to decode
  bool abandoned = false;        // EngineOptions::abandon stopped the call part-way
  bool paused = false;           // GenerationCall::pause_after_groups was reached
  // ATen operator calls the host dispatched (dispatch_counter.h), counted only
  // while a DispatchCounter lives on the calling thread (0 otherwise): in the
  // prefills (with their first tokens' choice), the decode steps, and the host
  // syncs (with the retirement of finished rows).
  int64_t prefill_dispatches = 0, decode_dispatches = 0, sync_dispatches = 0;
};

class Engine {
 public:
  // `tokenizer` may be null when no stop strings are used.
  Engine(std::shared_ptr<model::DecoderModel> model, const io::Tokenizer* tokenizer, EngineOptions options = {});
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  // n samples for each prompt, ordered by (prompt_index, sample_index).
  // InputError when a prompt is empty or holds an id outside the vocabulary,
  // n < 1, a sampling parameter is out of range, or prompt + max_new_tokens
  // exceeds the model's context.
  std::vector<Sample> generate(const std::vector<std::vector<int32_t>>& prompts, int64_t n,
                               const SamplingParams& params);
  // The samples of `call` over `prompts` (partial rollouts, multi-turn turns).
  // InputError as generate(), and when a sample's prompt_index is outside
  // `prompts`, it has as many tokens as max_new_tokens, or its log-probs do not
  // match its tokens.
  GenerationResult run(const std::vector<std::vector<int32_t>>& prompts, GenerationCall call,
                       const SamplingParams& params);

  const GenerateStats& last_stats() const { return stats_; }
  model::DecoderModel& model() { return *model_; }

 private:
  std::shared_ptr<model::DecoderModel> model_;
  const io::Tokenizer* tokenizer_;
  EngineOptions options_;
  GenerateStats stats_;
  std::shared_ptr<SlotProjections> projections_;  // the model's linear layers, packed memory kept across calls
  std::unique_ptr<DecodeWorkspace> workspace_;    // DecodeStep::graphs: the last call's buffers and graphs
};

}  // namespace hpcrl::rollout
