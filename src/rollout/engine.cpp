// The generation loop (engine.h): a queue of (prompt, sample) sequences and a
// batch of live slots. Each iteration prefills waiting sequences into free
// slots (continuous batching; static batching refills only an empty batch),
// decodes one token for every live slot, and retires finished sequences by
// moving the last live slot into the hole, so live rows stay [0, B) and no
// step copies more than the retired rows' caches.
#include "hpcrl/rollout/engine.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <deque>

#include "hpcrl/rollout/kv_slots.h"
#include "hpcrl/rollout/sampling.h"
#include "hpcrl/rollout/slot_forward.h"
#include "hpcrl/rollout/stop_rules.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

namespace {
// Attention-score elements one prefill may hold (1 GiB in fp32).
constexpr int64_t kPrefillScores = int64_t(1) << 28;

struct Sequence {
  const std::vector<int32_t>* prompt_ids = nullptr;
  at::Generator gen;
  Sample out;
};

void validate(const std::vector<std::vector<int32_t>>& prompts, int64_t n, const SamplingParams& params,
              const ModelArch& arch) {
  HPCRL_CHECK_INPUT(n >= 1, "n (samples per prompt) must be at least 1, got " << n);
  HPCRL_CHECK_INPUT(params.max_new_tokens >= 1, "max_new_tokens must be at least 1, got " << params.max_new_tokens);
  HPCRL_CHECK_INPUT(params.temperature >= 0, "temperature must be >= 0 (0 = greedy), got " << params.temperature);
  HPCRL_CHECK_INPUT(params.top_p > 0 && params.top_p <= 1, "top_p must be in (0, 1] (1 = off), got " << params.top_p);
  HPCRL_CHECK_INPUT(params.top_k >= 0, "top_k must be >= 0 (0 = off), got " << params.top_k);
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
}
}  // namespace

Engine::Engine(std::shared_ptr<model::DecoderModel> model, const io::Tokenizer* tokenizer, EngineOptions options)
    : model_(std::move(model)), tokenizer_(tokenizer), options_(std::move(options)) {
  HPCRL_CHECK_INPUT(options_.max_batch >= 1, "rollout max_batch must be at least 1, got " << options_.max_batch);
}

std::vector<Sample> Engine::generate(const std::vector<std::vector<int32_t>>& prompts, int64_t n,
                                     const SamplingParams& params) {
  const ModelArch& arch = model_->arch();
  validate(prompts, n, params, arch);
  const StopRules stop(params, tokenizer_);
  torch::NoGradGuard no_grad;
  auto t0 = std::chrono::steady_clock::now();
  stats_ = {};

  std::deque<Sequence> pending;
  int64_t longest_prompt = 0;
  for (int64_t p = 0; p < int64_t(prompts.size()); ++p) {
    longest_prompt = std::max<int64_t>(longest_prompt, prompts[p].size());
    for (int64_t i = 0; i < n; ++i) {
      Sequence s;
      s.prompt_ids = &prompts[p];
      s.gen = sample_generator(params.seed, params.prompt_offset + p, i);
      s.out.prompt_index = p;
      s.out.sample_index = i;
      pending.push_back(std::move(s));
    }
  }
  const int64_t total = static_cast<int64_t>(pending.size());
  // Expert-parallel ranks must run the same number of forwards (see engine.h),
  // even when one of them has no prompts at all.
  const auto& ctx = model_->parallel_context();
  dist::CommPtr lockstep = arch.num_experts > 0 && ctx.ep_size() > 1 ? ctx.ep : nullptr;
  if (total == 0 && !lockstep) return {};

  const int64_t slot_count = std::max<int64_t>(1, std::min(options_.max_batch, total));
  const int64_t local_heads = arch.num_heads / ctx.tp_size();
  KvSlots slots(*model_, slot_count, std::max<int64_t>(1, longest_prompt + params.max_new_tokens));
  SlotForward forward(*model_);
  stats_.cache_bytes = slots.bytes();
  std::vector<Sequence> active;  // active[r] lives in slot r
  std::vector<Sample> done;
  done.reserve(total);

  // Appends one token to live rows [first, first + logits.size(0)) and applies the stop rules.
  auto choose = [&](at::Tensor logits, int64_t first) {
    logits = logits.cpu();
    const bool tempered = params.logprobs_at_temperature && params.temperature > 0;
    at::Tensor logp = (tempered ? logits.to(at::kFloat) / params.temperature : logits).log_softmax(-1);  // [R, V]
    at::Tensor greedy = params.temperature <= 0 ? logits.argmax(-1) : at::Tensor();
    for (int64_t r = 0; r < logits.size(0); ++r) {
      Sequence& s = active[first + r];
      int64_t tok = greedy.defined() ? greedy[r].item<int64_t>()
                                     : sample_token(logits[r], params.temperature, params.top_k, params.top_p, s.gen);
      s.out.tokens.push_back(static_cast<int32_t>(tok));
      s.out.logprobs.push_back(logp[r][tok].item<float>());
      s.out.finish_reason = stop.check(s.out.tokens);
    }
    stats_.generated_tokens += logits.size(0);
  };
  // Moves finished rows to `done`; the last live row fills each hole.
  auto retire = [&] {
    const size_t before = done.size();
    for (int64_t r = int64_t(active.size()) - 1; r >= 0; --r) {
      if (active[r].out.finish_reason.empty()) continue;
      done.push_back(std::move(active[r].out));
      const int64_t last = int64_t(active.size()) - 1;
      if (r != last) {
        slots.move(last, r);
        active[r] = std::move(active[last]);
      }
      active.pop_back();
    }
    if (options_.progress && done.size() != before) options_.progress(int64_t(done.size()), total);
  };
  auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto refill = [&] {
    trace::ScopedSpan span("rollout/prefill");
    const auto start = std::chrono::steady_clock::now();
    std::vector<const std::vector<int32_t>*> uniq;  // one prefill row per distinct prompt
    std::vector<int64_t> prompt_of;
    const int64_t first = int64_t(active.size());
    int64_t longest = 0;
    while (!pending.empty() && int64_t(active.size()) < slot_count) {
      Sequence& s = pending.front();
      if (uniq.empty() || uniq.back() != s.prompt_ids) {
        // One prefill's attention scores, [U, heads, L, L], stay within a bound;
        // the rest waits for the next iteration (one prefill per iteration keeps
        // expert-parallel ranks in step).
        const int64_t L = std::max<int64_t>(longest, s.prompt_ids->size());
        if (!uniq.empty() && int64_t(uniq.size() + 1) * local_heads * L * L > kPrefillScores) break;
        longest = L;
        uniq.push_back(s.prompt_ids);
        stats_.prompt_tokens += int64_t(s.prompt_ids->size());
      }
      prompt_of.push_back(int64_t(uniq.size()) - 1);
      active.push_back(std::move(s));
      pending.pop_front();
    }
    span.add_arg("sequences", double(prompt_of.size()));
    at::Tensor logits = forward.prefill(slots, first, uniq, prompt_of);
    ++stats_.forward_calls;
    choose(logits, first);  // each fresh sequence's first token comes from its prefill
    stats_.prefill_seconds += seconds_since(start);
  };
  auto decode = [&] {
    trace::ScopedSpan span("rollout/decode");
    span.add_arg("batch", double(active.size()));
    const auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> last(active.size());
    for (size_t r = 0; r < active.size(); ++r) last[r] = active[r].out.tokens.back();
    at::Tensor logits = forward.decode(slots, int64_t(active.size()), last);
    ++stats_.forward_calls;
    ++stats_.decode_steps;
    choose(logits, 0);
    stats_.decode_seconds += seconds_since(start);
  };
  // Element-wise OR of flags over the ep group (identity without lockstep).
  auto any_over_ep = [&](std::vector<int32_t> flags) {
    if (!lockstep) return flags;
    at::Tensor t = at::tensor(flags, at::kInt);
    lockstep->all_reduce(t, dist::ReduceOp::kMax);
    for (size_t i = 0; i < flags.size(); ++i) flags[i] = t[int64_t(i)].item<int32_t>();
    return flags;
  };

  for (;;) {
    const bool has_work = !pending.empty() || !active.empty();
    const bool prefill_now = !pending.empty() && int64_t(active.size()) < slot_count &&
                             (options_.continuous_batching || active.empty());
    auto any = any_over_ep({has_work, prefill_now});
    if (!any[0]) break;
    if (prefill_now) refill();
    else if (any[1]) forward.idle_step();
    retire();
    const bool decode_now = !active.empty();
    const bool any_decode = any_over_ep({decode_now})[0] != 0;
    if (decode_now) decode();
    else if (any_decode) forward.idle_step();
    retire();
  }
  std::sort(done.begin(), done.end(), [](const Sample& a, const Sample& b) {
    return a.prompt_index != b.prompt_index ? a.prompt_index < b.prompt_index : a.sample_index < b.sample_index;
  });
  stats_.seconds = seconds_since(t0);
  return done;
}

}  // namespace hpcrl::rollout
