// The steps of one generation call (generation_run.h). Each iteration prefills
// waiting sequences into free slots (continuous batching; static batching
// refills only an empty batch), decodes one token for every live slot, and
// retires finished sequences by moving the last live slot into the hole, so
// live rows stay [0, B) and no step copies more than the retired rows' caches.
#include "rollout/generation_run.h"

#include <torch/torch.h>

#include <algorithm>

#include "hpcrl/rollout/sampling.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::rollout {

namespace {
// Attention-score elements one prefill may hold (1 GiB in fp32).
constexpr int64_t kPrefillScores = int64_t(1) << 28;

int64_t longest_prompt(const std::vector<std::vector<int32_t>>& prompts) {
  int64_t longest = 0;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, p.size());
  return longest;
}
}  // namespace

dist::CommPtr ep_lockstep(const model::DecoderModel& model) {
  const auto& ctx = model.parallel_context();
  return model.arch().num_experts > 0 && ctx.ep_size() > 1 ? ctx.ep : nullptr;
}

GenerationRun::GenerationRun(model::DecoderModel& model, const io::Tokenizer* tokenizer, const EngineOptions& options,
                             const std::vector<std::vector<int32_t>>& prompts, int64_t n, const SamplingParams& params)
    : options_(options),
      params_(params),
      stop_(params, tokenizer),
      lockstep_(ep_lockstep(model)),
      local_heads_(model.arch().num_heads / model.parallel_context().tp_size()),
      total_(int64_t(prompts.size()) * n),
      slot_count_(std::max<int64_t>(1, std::min(options.max_batch, total_))),
      // One slot more when a group may be admitted in parts: it keeps the
      // prompt of the group at the head of the queue (see admit_and_prefill).
      slots_(model, slot_count_ + (total_ > slot_count_ ? 1 : 0),
             std::max<int64_t>(1, longest_prompt(prompts) + params.max_new_tokens)),
      forward_(model) {
  for (int64_t p = 0; p < int64_t(prompts.size()); ++p)
    for (int64_t i = 0; i < n; ++i) {
      Sequence s;
      s.prompt_ids = &prompts[p];
      s.out.prompt_index = p;
      s.out.sample_index = i;
      pending_.push_back(std::move(s));
    }
  stats_.cache_bytes = slots_.bytes();
  done_.reserve(total_);
}

std::vector<Sample> GenerationRun::run() {
  while (step()) {
  }
  std::sort(done_.begin(), done_.end(), [](const Sample& a, const Sample& b) {
    return a.prompt_index != b.prompt_index ? a.prompt_index < b.prompt_index : a.sample_index < b.sample_index;
  });
  return std::move(done_);
}

bool GenerationRun::step() {
  if (options_.abandon && options_.abandon()) {
    stats_.abandoned = true;  // a stop was agreed: the rest of the call is left undone
    return false;
  }
  const bool has_work = !pending_.empty() || !active_.empty();
  const bool prefill_now = !pending_.empty() && int64_t(active_.size()) < slot_count_ &&
                           (options_.continuous_batching || active_.empty());
  const auto any = any_over_ep({has_work, prefill_now});
  if (!any[0]) return false;
  if (prefill_now) admit_and_prefill();
  else if (any[1]) forward_.idle_step();  // another ep rank prefills
  retire();
  const bool decode_now = !active_.empty();
  const bool any_decode = any_over_ep({decode_now})[0] != 0;
  if (decode_now) decode();
  else if (any_decode) forward_.idle_step();
  retire();
  return true;
}

void GenerationRun::admit_and_prefill() {
  trace::TimedSpan span("rollout/prefill");
  const int64_t first = int64_t(active_.size());
  std::vector<Sequence> fresh, from_prefix;  // prefilled now; copied from the kept group prompt
  std::vector<const std::vector<int32_t>*> uniq;  // one prefill row per distinct prompt
  std::vector<int64_t> prompt_of;
  int64_t longest = 0;
  while (!pending_.empty() && first + int64_t(fresh.size() + from_prefix.size()) < slot_count_) {
    Sequence& s = pending_.front();
    if (s.prompt_ids == prefix_prompt_) {
      from_prefix.push_back(std::move(s));
      pending_.pop_front();
      continue;
    }
    if (uniq.empty() || uniq.back() != s.prompt_ids) {
      // One prefill's attention scores, [U, heads, L, L], stay within a bound;
      // the rest waits for the next iteration (one prefill per iteration keeps
      // expert-parallel ranks in step).
      const int64_t L = std::max<int64_t>(longest, s.prompt_ids->size());
      if (!uniq.empty() && int64_t(uniq.size() + 1) * local_heads_ * L * L > kPrefillScores) break;
      longest = L;
      uniq.push_back(s.prompt_ids);
      stats_.prompt_tokens += int64_t(s.prompt_ids->size());
    }
    prompt_of.push_back(int64_t(uniq.size()) - 1);
    fresh.push_back(std::move(s));
    pending_.pop_front();
  }
  span.add_arg("sequences", double(fresh.size() + from_prefix.size()));
  std::vector<at::Tensor> logits;  // [F, V] pieces, in slot order: fresh rows, then copied ones
  if (!fresh.empty()) {
    logits.push_back(forward_.prefill(slots_, first, uniq, prompt_of));
    ++stats_.forward_calls;
  } else if (lockstep_) {
    forward_.idle_step();  // the other ep ranks run their prefill forward now
  }
  for (size_t c = 0; c < from_prefix.size(); ++c) {
    slots_.move(prefix_slot(), first + int64_t(fresh.size() + c));
    logits.push_back(prefix_logits_);
  }
  for (auto& s : fresh) active_.push_back(std::move(s));
  for (auto& s : from_prefix) active_.push_back(std::move(s));
  keep_group_prefix(first, int64_t(fresh.size()), logits.empty() ? at::Tensor() : logits.front());
  choose(at::cat(logits), first);  // each fresh sequence's first token comes from its prompt's last logits
  stats_.prefill_seconds += span.elapsed_seconds();
}

void GenerationRun::keep_group_prefix(int64_t first, int64_t fresh, const at::Tensor& logits) {
  if (pending_.empty() || pending_.front().prompt_ids == prefix_prompt_) return;
  prefix_prompt_ = nullptr;
  if (slots_.slots() == slot_count_) return;  // every sequence fit the slots: no group waits
  // The head of the queue was prefilled now if its group is split across admissions.
  for (int64_t f = 0; f < fresh; ++f)
    if (active_[first + f].prompt_ids == pending_.front().prompt_ids) {
      slots_.move(first + f, prefix_slot());
      prefix_logits_ = logits.narrow(0, f, 1).clone();
      prefix_prompt_ = pending_.front().prompt_ids;
      return;
    }
}

void GenerationRun::decode() {
  trace::TimedSpan span("rollout/decode");
  span.add_arg("batch", double(active_.size()));
  std::vector<int64_t> last(active_.size());
  for (size_t r = 0; r < active_.size(); ++r) last[r] = active_[r].out.tokens.back();
  at::Tensor logits = forward_.decode(slots_, int64_t(active_.size()), last);
  ++stats_.forward_calls;
  ++stats_.decode_steps;
  choose(logits, 0);
  stats_.decode_seconds += span.elapsed_seconds();
}

void GenerationRun::choose(at::Tensor logits, int64_t first) {
  const int64_t rows = logits.size(0);
  at::Tensor uniforms;
  if (params_.temperature > 0) {
    std::vector<DrawKey> keys;
    for (int64_t r = 0; r < rows; ++r) {
      const Sample& out = active_[first + r].out;
      keys.push_back({params_.prompt_offset + out.prompt_index, out.sample_index, int64_t(out.tokens.size())});
    }
    uniforms = draw_uniforms(params_.seed, keys);
  }
  const TokenFilter filter{params_.temperature, params_.top_k, params_.top_p, params_.min_p};
  ChosenTokens chosen = choose_tokens(logits, filter, uniforms, params_.logprobs_at_temperature);
  // One copy of [R] ids and log-probs to the host, not of the [R, V] logits.
  const at::Tensor ids = chosen.ids.cpu().contiguous(), logprobs = chosen.logprobs.cpu().contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  const float* logprob = logprobs.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    Sequence& s = active_[first + r];
    s.out.tokens.push_back(static_cast<int32_t>(id[r]));
    s.out.logprobs.push_back(logprob[r]);
    s.out.finish_reason = stop_.check(s.out.tokens);
  }
  stats_.generated_tokens += rows;
}

void GenerationRun::retire() {
  const size_t before = done_.size();
  for (int64_t r = int64_t(active_.size()) - 1; r >= 0; --r) {
    if (active_[r].out.finish_reason.empty()) continue;
    done_.push_back(std::move(active_[r].out));
    const int64_t last = int64_t(active_.size()) - 1;
    if (r != last) {
      slots_.move(last, r);
      active_[r] = std::move(active_[last]);
    }
    active_.pop_back();
  }
  if (options_.progress && done_.size() != before) options_.progress(int64_t(done_.size()), total_);
}

std::vector<int32_t> GenerationRun::any_over_ep(std::vector<int32_t> flags) const {
  if (!lockstep_) return flags;
  at::Tensor t = at::tensor(flags, at::kInt);
  lockstep_->all_reduce(t, dist::ReduceOp::kMax);
  for (size_t i = 0; i < flags.size(); ++i) flags[i] = t[int64_t(i)].item<int32_t>();
  return flags;
}

}  // namespace hpcrl::rollout
