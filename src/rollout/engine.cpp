// The engine's entry point (engine.h): checks the request, then runs it as one
// GenerationRun (generation_run.h holds the loop).
#include "hpcrl/rollout/engine.h"

#include <torch/utils.h>

#include <optional>

#include "hpcrl/model/parameter_units.h"
#include "hpcrl/rollout/slot_projections.h"
#include "hpcrl/util/check.h"
#include "rollout/decode_workspace.h"
#include "rollout/generation_run.h"

namespace hpcrl::rollout {

namespace {
void validate(const std::vector<std::vector<int32_t>>& prompts, const SamplingParams& params, const ModelArch& arch) {
  HPCRL_CHECK_INPUT(params.max_new_tokens >= 1, "max_new_tokens must be at least 1, got " << params.max_new_tokens);
  HPCRL_CHECK_INPUT(params.temperature >= 0, "temperature must be >= 0 (0 = greedy), got " << params.temperature);
  HPCRL_CHECK_INPUT(params.top_p > 0 && params.top_p <= 1, "top_p must be in (0, 1] (1 = off), got " << params.top_p);
  HPCRL_CHECK_INPUT(params.top_k >= 0, "top_k must be >= 0 (0 = off), got " << params.top_k);
  HPCRL_CHECK_INPUT(params.min_p >= 0 && params.min_p < 1, "min_p must be in [0, 1) (0 = off), got " << params.min_p);
  for (size_t p = 0; p < prompts.size(); ++p) {
    HPCRL_CHECK_INPUT(!prompts[p].empty(), "prompt " << p << " is empty; every prompt needs at least one token");
    HPCRL_CHECK_INPUT(int64_t(prompts[p].size()) + params.max_new_tokens <= arch.max_position_embeddings,
                      "prompt " << p << " has " << prompts[p].size() << " tokens; with max_new_tokens "
                                << params.max_new_tokens << " it exceeds the model's context of "
                                << arch.max_position_embeddings
                                << " tokens: shorten the prompt or lower max_new_tokens");
    for (size_t t = 0; t < prompts[p].size(); ++t)
      HPCRL_CHECK_INPUT(prompts[p][t] >= 0 && prompts[p][t] < arch.vocab_size,
                        "prompt " << p << " token " << t << " is id " << prompts[p][t]
                                  << ", outside the model's vocabulary [0, " << arch.vocab_size
                                  << "): the prompt was tokenized for another model");
  }
  HPCRL_CHECK_INPUT(params.prompt_keys.empty() || params.prompt_keys.size() == prompts.size(),
                    "prompt_keys has " << params.prompt_keys.size() << " keys for " << prompts.size()
                                       << " prompts: give one per prompt, or none");
}

void validate_paused(const Sample& s, size_t k, const std::vector<std::vector<int32_t>>& prompts,
                     const SamplingParams& params, const ModelArch& arch) {
  HPCRL_CHECK_INPUT(s.prompt_index >= 0 && s.prompt_index < int64_t(prompts.size()),
                    "sample " << k << " is of prompt " << s.prompt_index << ", outside the call's " << prompts.size()
                              << " prompts");
  HPCRL_CHECK_INPUT(s.finish_reason.empty(), "sample " << k << " has finished (" << s.finish_reason
                                                       << "): only unfinished samples continue");
  HPCRL_CHECK_INPUT(int64_t(s.tokens.size()) < params.max_new_tokens,
                    "sample " << k << " has " << s.tokens.size() << " tokens, max_new_tokens is "
                              << params.max_new_tokens << ": nothing is left to generate");
  HPCRL_CHECK_INPUT(s.logprobs.size() == s.tokens.size(),
                    "sample " << k << " has " << s.logprobs.size() << " log-probs for " << s.tokens.size()
                              << " tokens: pass a paused sample back as the engine returned it");
  HPCRL_CHECK_INPUT(s.sampled.empty() || s.sampled.size() == s.tokens.size(),
                    "sample " << k << " marks " << s.sampled.size() << " tokens as sampled or inserted for "
                              << s.tokens.size() << " tokens: pass a paused sample back as the engine returned it");
  for (int32_t id : s.tokens)
    HPCRL_CHECK_INPUT(id >= 0 && id < arch.vocab_size,
                      "sample " << k << " holds token id " << id << ", outside the vocabulary [0, "
                                << arch.vocab_size << ")");
  if (!s.cache) return;
  // The cache holds the prompt and every token but the last (the next step's input).
  const int64_t cached = int64_t(prompts[size_t(s.prompt_index)].size() + s.tokens.size()) - 1;
  HPCRL_CHECK_INPUT(!s.tokens.empty() && s.cache->length == cached && int64_t(s.cache->k.size()) == arch.num_layers,
                    "sample " << k << " has a kept cache of " << s.cache->length << " tokens and " << s.cache->k.size()
                              << " layers, where its prompt and tokens need " << cached << " and the model has "
                              << arch.num_layers << ": pass a paused sample back as the engine returned it");
}

// What a generation call holds gathered of a ZeRO-3 model (a no-op for any
// other): the outer unit when the projections pack layer by layer (they gather
// each layer themselves), every unit when they read the model's weights.
// Collective over the shard group, like the call.
class CallParameters {
 public:
  explicit CallParameters(model::DecoderModel& m) {
    if (!m.parameter_units()) return;
    if (!SlotProjections::gathers_by_layer(m)) {
      whole_.emplace(m);
      return;
    }
    outer_ = m.parameter_units();
    outer_->before_forward(model::ParameterUnits::kOuter);
  }
  ~CallParameters() {
    if (outer_) outer_->after_forward(model::ParameterUnits::kOuter, at::Tensor());
  }
  CallParameters(const CallParameters&) = delete;
  CallParameters& operator=(const CallParameters&) = delete;

 private:
  model::ParameterUnits* outer_ = nullptr;
  std::optional<model::WholeParameters> whole_;
};
}  // namespace

int64_t Sample::sampled_count() const {
  if (sampled.empty()) return int64_t(tokens.size());
  int64_t n = 0;
  for (uint8_t m : sampled) n += m != 0;
  return n;
}

GenerationCall GenerationCall::fresh(int64_t prompts, int64_t n, TurnHandler* turns) {
  GenerationCall call;
  for (int64_t p = 0; p < prompts; ++p)
    for (int64_t i = 0; i < n; ++i) {
      call.samples.emplace_back();
      call.samples.back().prompt_index = p;
      call.samples.back().sample_index = i;
    }
  call.turns = turns;
  return call;
}

Engine::Engine(std::shared_ptr<model::DecoderModel> model, const io::Tokenizer* tokenizer, EngineOptions options)
    : model_(std::move(model)),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      projections_(SlotProjections::shared_for(*model_)) {
  HPCRL_CHECK_INPUT(options_.max_batch >= 1, "rollout max_batch must be at least 1, got " << options_.max_batch);
  HPCRL_CHECK_INPUT(options_.host_sync_interval >= 0,
                    "host_sync_interval must be >= 0 (0 = by device), got " << options_.host_sync_interval);
  HPCRL_CHECK_INPUT(options_.prefill_attention_elements >= 1,
                    "prefill_attention_elements must be >= 1, got " << options_.prefill_attention_elements);
}

Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

std::vector<Sample> Engine::generate(const std::vector<std::vector<int32_t>>& prompts, int64_t n,
                                     const SamplingParams& params) {
  HPCRL_CHECK_INPUT(n >= 1, "n (samples per prompt) must be at least 1, got " << n);
  return run(prompts, GenerationCall::fresh(int64_t(prompts.size()), n), params).finished;
}

GenerationResult Engine::run(const std::vector<std::vector<int32_t>>& prompts, GenerationCall call,
                             const SamplingParams& params) {
  validate(prompts, params, model_->arch());
  for (size_t k = 0; k < call.samples.size(); ++k) validate_paused(call.samples[k], k, prompts, params, model_->arch());
  torch::NoGradGuard no_grad;
  CallParameters gathered(*model_);
  stats_ = {};
  // With no prompts only an ep rank has work: its group's other ranks step with it.
  if (call.samples.empty() && !ep_lockstep(*model_)) {
    // A rank without prompts still takes part in the layer-by-layer gathers of its shard group.
    if (SlotProjections::gathers_by_layer(*model_)) projections_->prepare(true);
    return {};
  }
  const WorkspaceLayout layout = WorkspaceLayout::of(*model_, options_, prompts, int64_t(call.samples.size()), params);
  // Packed CPU weights pay from two rows on (slot_projections.h); every call packs the current weights.
  projections_->prepare(layout.live_slots > 1);
  const bool reused = workspace_ && workspace_->reusable_for(layout, *model_);
  if (!reused) {
    workspace_.reset();  // the old buffers go before the new ones are allocated
    workspace_ = std::make_unique<DecodeWorkspace>(*model_, options_, *projections_, layout, params);
  }
  workspace_->begin_call(params);
  GenerationRun generation(*model_, tokenizer_, options_, *workspace_, prompts, std::move(call), params);
  GenerationResult result = generation.run();
  stats_ = generation.stats();
  stats_.reused_buffers = reused;
  // Graphs are worth keeping; merged LoRA weights are made anew by every call, so graphs over them are not.
  if (options_.decode_step != DecodeStep::graphs || projections_->merges_adapters()) workspace_.reset();
  return result;
}

}  // namespace hpcrl::rollout
