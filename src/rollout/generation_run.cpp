// The steps of one generation call (generation_run.h). Each iteration prefills
// waiting sequences into free slots (continuous batching; static batching
// refills only an empty batch), decodes one token for every live slot, and
// retires finished sequences by moving the last live slot into the hole, so
// live rows stay [0, B) and no step copies more than the retired rows' caches.
#include "rollout/generation_run.h"

#include <torch/utils.h>

#include <algorithm>

#include "hpcrl/rollout/dispatch_counter.h"
#include "hpcrl/rollout/sampling.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

dist::CommPtr ep_lockstep(const model::DecoderModel& model) {
  const auto& ctx = model.parallel_context();
  return model.arch().num_experts > 0 && ctx.ep_size() > 1 ? ctx.ep : nullptr;
}

GenerationRun::Sequence GenerationRun::queued(const std::vector<std::vector<int32_t>>& prompts, Sample sample) {
  Sequence s;
  const auto& prompt = prompts[size_t(sample.prompt_index)];
  if (sample.tokens.empty()) {
    s.prompt_ids = &prompt;  // fresh: samples of one prompt share its prefill
  } else {
    auto context = std::make_shared<std::vector<int32_t>>(prompt);
    context->insert(context->end(), sample.tokens.begin(), sample.tokens.end());
    s.resumed = std::move(context);
    s.prompt_ids = s.resumed.get();
  }
  s.prompt_length = int64_t(prompt.size());
  s.inserted = int64_t(sample.tokens.size()) - sample.sampled_count();
  s.out = std::move(sample);
  return s;
}

GenerationRun::GenerationRun(model::DecoderModel& model, const io::Tokenizer* tokenizer, const EngineOptions& options,
                             DecodeWorkspace& workspace, const std::vector<std::vector<int32_t>>& prompts,
                             GenerationCall call, const SamplingParams& params)
    : options_(options),
      params_(params),
      stop_(params, tokenizer),
      lockstep_(ep_lockstep(model)),
      local_heads_(model.arch().num_heads / model.parallel_context().tp_size()),
      total_(int64_t(call.samples.size())),
      slot_count_(workspace.layout().live_slots),
      slots_(workspace.slots),
      forward_(workspace.forward),
      sync_interval_(workspace.layout().interval),
      rows_(workspace.rows),
      fixed_(workspace.fixed.get()),
      fixed_prefill_(workspace.fixed_prefill.get()),
      launcher_(workspace.launcher.get()),
      captures_before_(launcher_ ? launcher_->captures() : 0),
      replays_before_(launcher_ ? launcher_->replays() : 0),
      unfinished_of_prompt_(prompts.size(), 0),
      pause_after_groups_(call.pause_after_groups),
      keep_paused_cache_(call.keep_paused_cache),
      turns_(call.turns),
      tp_(model.parallel_context().tp_size() > 1 ? model.parallel_context().tp : nullptr) {
  for (Sample& sample : call.samples) {
    ++unfinished_of_prompt_[size_t(sample.prompt_index)];
    pending_.push_back(queued(prompts, std::move(sample)));
  }
  stats_.cache_bytes = slots_.bytes();
  done_.reserve(total_);
  // The ranks of an ep group step together, and a multi-turn call adds a collective to every iteration.
  const auto with_turns = any_over_ep({turns_ ? 1 : 0, turns_ ? 0 : 1});
  HPCRL_CHECK_INPUT(!(with_turns[0] && with_turns[1]),
                    "the ranks of an expert-parallel group made multi-turn and single-turn calls together: they step "
                    "together, so every rank's call must pass a turn handler, or none");
}

GenerationResult GenerationRun::run() {
  while (step()) {
  }
  const auto by_prompt_then_sample = [](const Sample& a, const Sample& b) {
    return a.prompt_index != b.prompt_index ? a.prompt_index < b.prompt_index : a.sample_index < b.sample_index;
  };
  std::sort(done_.begin(), done_.end(), by_prompt_then_sample);
  std::sort(paused_.begin(), paused_.end(), by_prompt_then_sample);
  if (launcher_) {  // the launcher's counts so far, less those before this call
    stats_.graph_captures = launcher_->captures() - captures_before_;
    stats_.graph_replays = launcher_->replays() - replays_before_;
  }
  return {std::move(done_), std::move(paused_)};
}

bool GenerationRun::step() {
  if (options_.abandon && options_.abandon()) {
    stats_.abandoned = true;  // a stop was agreed: the rest of the call is left undone
    return false;
  }
  if (pause_due()) {
    pause();
    return false;
  }
  if (turns_) resume_replies();
  const bool has_work = !pending_.empty() || !active_.empty() || !parked_.empty();
  const bool prefill_now = !pending_.empty() && free_slots() > 0 &&
                           (options_.continuous_batching || (active_.empty() && parked_.empty()));
  Admission admission = prefill_now ? admit() : Admission{};
  // Every rank of an ep group runs as many prefill forwards as the one with the most.
  const auto any = any_over_ep({has_work, int32_t(admission.forwards())});
  if (!any[0]) return false;
  prefill(std::move(admission), any[1]);
  sync_if_due();
  if (pause_due()) {  // the prefill's first tokens ended the groups asked for
    pause();
    return false;
  }
  const bool decode_now = !active_.empty();
  const bool any_decode = any_over_ep({decode_now})[0] != 0;
  if (decode_now) decode();
  else if (any_decode) forward_.idle_step();
  sync_if_due();
  return true;
}

GenerationRun::Admission GenerationRun::admit() {
  Admission a;
  const int64_t first = int64_t(active_.size());
  std::vector<Sequence> others;  // later samples of the prompts being prefilled
  int64_t longest = 0;
  const int64_t free = free_slots();
  while (!pending_.empty() && int64_t(a.fresh.size() + others.size() + a.from_prefix.size() + a.cached.size()) < free) {
    Sequence& s = pending_.front();
    if (s.out.cache) {
      a.cached.push_back(std::move(s));
      pending_.pop_front();
      continue;
    }
    if (s.prompt_ids == prefix_prompt_) {
      a.from_prefix.push_back(std::move(s));
      pending_.pop_front();
      continue;
    }
    if (a.prompts.empty() || a.prompts.back() != s.prompt_ids) {
      // A new distinct prompt, if one chunk of every prompt still fits the
      // prefill's attention budget; the rest waits for the next iteration.
      const int64_t L = std::max<int64_t>(longest, s.prompt_ids->size());
      if (!a.prompts.empty() && forward_.prefill_chunk(int64_t(a.prompts.size()) + 1, L) == 0) break;
      longest = L;
      a.prompts.push_back(s.prompt_ids);
      stats_.prompt_tokens += int64_t(s.prompt_ids->size());
      stats_.resumed_tokens += int64_t(s.out.tokens.size());
      a.fresh.push_back(std::move(s));  // the prompt's first sample: prefilled into its own slot
    } else {
      others.push_back(std::move(s));
    }
    pending_.pop_front();
  }
  for (int64_t u = 0; u < int64_t(a.prompts.size()); ++u) a.prompt_of.push_back(u);
  for (auto& s : others) {
    a.prompt_of.push_back(std::find(a.prompts.begin(), a.prompts.end(), s.prompt_ids) - a.prompts.begin());
    a.fresh.push_back(std::move(s));
  }
  if (!a.prompts.empty()) a.chunk = std::max<int64_t>(1, forward_.prefill_chunk(int64_t(a.prompts.size()), longest));
  a.longest = longest;
  return a;
}

void GenerationRun::prefill(Admission a, int64_t group_forwards) {
  if (a.fresh.empty() && a.from_prefix.empty() && a.cached.empty()) {
    for (int64_t i = 0; i < group_forwards; ++i) forward_.idle_step();  // another ep rank prefills
    return;
  }
  trace::TimedSpan span("rollout/prefill");
  const DispatchTally dispatches(stats_.prefill_dispatches);
  const int64_t first = int64_t(active_.size()), fresh = int64_t(a.fresh.size());
  span.add_arg("sequences", double(a.fresh.size() + a.from_prefix.size()));
  span.add_arg("cached", double(a.cached.size()));
  const bool on_device = fixed_prefill_takes(a);
  std::vector<at::Tensor> logits;  // [F, V] pieces of the rows the host chooses for, in slot order
  at::Tensor fresh_logits;
  if (fresh > 0) {
    if (!on_device) fresh_logits = forward_.prefill(slots_, first, a.prompts, a.prompt_of, a.chunk);
    else  // the fixed prefill runs once the rows are started; the slots' host lengths first
      for (int64_t f = 0; f < fresh; ++f) slots_.set_length(first + f, int64_t(a.fresh[size_t(f)].prompt_ids->size()));
    stats_.forward_calls += a.forwards();
    stats_.prefill_forwards += a.forwards();
  }
  for (int64_t i = a.forwards(); i < group_forwards; ++i) forward_.idle_step();  // another ep rank prefills longer
  if (fresh_logits.defined()) logits.push_back(fresh_logits);
  if (!a.from_prefix.empty()) {  // the samples of the kept group prompt copy the prefix slot, in one move
    const int64_t at = first + fresh, copies = int64_t(a.from_prefix.size());
    std::vector<int64_t> to(size_t(copies), 0);
    for (int64_t c = 0; c < copies; ++c) to[size_t(c)] = at + c;
    slots_.move(std::vector<int64_t>(size_t(copies), prefix_slot()), to);
    logits.push_back(prefix_logits_.expand({copies, prefix_logits_.size(1)}));
  }
  for (auto& s : a.fresh) active_.push_back(std::move(s));
  for (auto& s : a.from_prefix) active_.push_back(std::move(s));
  const int64_t first_cached = int64_t(active_.size());
  restore_cached(std::move(a.cached), first_cached);
  start_rows(first);
  if (on_device) {  // chooses the first tokens too
    fresh_logits = fixed_prefill_->prefill(first, a.prompts, a.prompt_of);
    ++stats_.fixed_prefills;
  }
  keep_group_prefix(first, fresh, fresh_logits);
  // Each fresh sequence's first token comes from its prompt's last logits; a cached row's input is its last token.
  if (!logits.empty()) choose(at::cat(logits), on_device ? first + fresh : first);
  if (on_device)
    for (int64_t f = 0; f < fresh; ++f) ++active_[size_t(first + f)].unsynced;
  std::vector<int64_t> last;
  for (int64_t r = first_cached; r < int64_t(active_.size()); ++r) last.push_back(active_[r].out.tokens.back());
  if (!last.empty()) rows_.feed(first_cached, at::tensor(last, at::kLong).to(rows_.last_tokens(1).device()));
  stats_.prefill_seconds += span.elapsed_seconds();
}

bool GenerationRun::fixed_prefill_takes(const Admission& a) const {
  return fixed_prefill_ && !a.fresh.empty() &&
         fixed_prefill_->fits(int64_t(a.prompts.size()), a.longest, int64_t(a.fresh.size()));
}

void GenerationRun::restore_cached(std::vector<Sequence> cached, int64_t first) {
  for (size_t c = 0; c < cached.size(); ++c) {
    Sequence& s = cached[c];
    slots_.copy_in(first + int64_t(c), *s.out.cache);
    s.out.cache.reset();  // its memory goes once the slot holds it
    active_.push_back(std::move(s));
  }
  stats_.cached_resumes += int64_t(cached.size());
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
  const DispatchTally dispatches(stats_.decode_dispatches);
  const int64_t rows = int64_t(active_.size());
  span.add_arg("batch", double(rows));
  ++stats_.forward_calls;
  ++stats_.decode_steps;
  if (!parked_.empty()) ++stats_.decode_steps_during_calls;
  if (fixed_) {
    const StepShape shape = fixed_->step(rows);  // chooses the tokens too
    span.add_arg("bucket_rows", double(shape.rows));
    span.add_arg("bucket_keys", double(shape.keys));
    for (int64_t r = 0; r < rows; ++r) ++active_[r].unsynced;
  } else {
    at::Tensor logits = forward_.decode(slots_, rows, rows_.last_tokens(rows), rows_.positions(rows));
    rows_.advance(rows);
    choose(logits, 0);
  }
  stats_.decode_seconds += span.elapsed_seconds();
}

DrawKey GenerationRun::draw_key(const Sequence& s) const {
  const int64_t prompt = params_.prompt_keys.empty() ? params_.prompt_offset + s.out.prompt_index
                                                     : params_.prompt_keys[size_t(s.out.prompt_index)];
  return {prompt, s.out.sample_index, s.draws()};
}

void GenerationRun::start_rows(int64_t first) {
  std::vector<int64_t> positions, generated;
  std::vector<DrawKey> draws;
  for (int64_t r = first; r < int64_t(active_.size()); ++r) {
    positions.push_back(slots_.length(r));
    generated.push_back(int64_t(active_[r].out.tokens.size()));  // a paused sample's tokens count to max_new_tokens
    draws.push_back(draw_key(active_[r]));
  }
  rows_.start(first, positions, generated, draws);
}

void GenerationRun::choose(const at::Tensor& logits, int64_t first) {
  const int64_t rows = logits.size(0);
  at::Tensor uniforms;
  if (params_.temperature > 0) {
    std::vector<DrawKey> keys;
    for (int64_t r = 0; r < rows; ++r) keys.push_back(draw_key(active_[first + r]));
    uniforms = draw_uniforms(params_.seed, keys);
  }
  const TokenFilter filter{params_.temperature, params_.top_k, params_.top_p, params_.min_p};
  ChosenTokens chosen = choose_tokens(logits, filter, uniforms, params_.logprobs_at_temperature);
  rows_.append(first, chosen.ids, chosen.logprobs);
  for (int64_t r = 0; r < rows; ++r) ++active_[first + r].unsynced;
}

void GenerationRun::sync_if_due() {
  bool due = false;
  for (const Sequence& s : active_) due = due || s.unsynced >= sync_interval_ || s.steps() >= params_.max_new_tokens;
  if (!due) return;
  const DispatchTally dispatches(stats_.sync_dispatches);
  sync();
  retire();
  if (turns_) park_turns();
}

void GenerationRun::sync() {
  const int64_t rows = int64_t(active_.size());
  ++stats_.host_syncs;
  // The one copy to the host of this interval: [rows] counts and [rows, interval + 1] tokens and log-probs.
  const DeviceRows::Log log = rows_.take_log(rows);
  const auto count = log.count.accessor<int64_t, 1>();
  const auto ids = log.ids.accessor<int64_t, 2>();
  const auto logprobs = log.logprobs.accessor<float, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    Sequence& s = active_[r];
    for (int64_t j = 0; j < count[r] && s.out.finish_reason.empty() && !s.ends_turn; ++j) {
      s.out.tokens.push_back(static_cast<int32_t>(ids[r][j]));
      s.out.logprobs.push_back(logprobs[r][j]);
      if (!s.out.sampled.empty()) s.out.sampled.push_back(1);
      s.out.finish_reason = stop_.check(s.out.tokens);
      s.ends_turn = turns_ && s.out.finish_reason.empty() && turns_->ends_turn(s.out);
      ++stats_.generated_tokens;
    }
    s.unsynced = 0;
  }
}

void GenerationRun::retire() {
  std::vector<int64_t> source(active_.size());  // source[r]: the slot whose row ends up in slot r
  for (size_t r = 0; r < source.size(); ++r) source[r] = int64_t(r);
  for (int64_t r = int64_t(active_.size()) - 1; r >= 0; --r) {
    if (active_[r].out.finish_reason.empty()) continue;
    finished(std::move(active_[r].out));
    const int64_t last = int64_t(active_.size()) - 1;
    if (r != last) {
      source[size_t(r)] = source[size_t(last)];
      active_[r] = std::move(active_[last]);
    }
    active_.pop_back();
  }
  // The chain of moves above as one: each live row's slot and device state from where it was.
  std::vector<int64_t> from, to;
  for (int64_t r = 0; r < int64_t(active_.size()); ++r)
    if (source[size_t(r)] != r) {
      from.push_back(source[size_t(r)]);
      to.push_back(r);
    }
  slots_.move(from, to);
  rows_.move(from, to);
}

void GenerationRun::finished(Sample out) {
  if (--unfinished_of_prompt_[size_t(out.prompt_index)] == 0) ++complete_prompts_;
  done_.push_back(std::move(out));
  if (options_.progress) options_.progress(int64_t(done_.size()), total_);
}

bool GenerationRun::pause_due() const {
  if (pause_after_groups_ <= 0) return false;
  return any_over_ep({complete_prompts_ >= pause_after_groups_})[0] != 0;  // ep ranks stop stepping together
}

void GenerationRun::pause() {
  stats_.paused = true;
  bool unread = false;
  for (const Sequence& s : active_) unread = unread || s.unsynced > 0;
  if (unread) {  // another rank of the ep group reached the count between this rank's syncs
    sync();
    retire();
    if (turns_) park_turns();
  }
  if (turns_) finish_calls();
  // Every live row's tokens are read: its slot holds the prompt and all of them but the last.
  if (keep_paused_cache_)
    for (int64_t r = 0; r < int64_t(active_.size()); ++r)
      active_[r].out.cache = std::make_shared<const SlotCache>(slots_.copy_out(r));
  for (Sequence& s : active_) paused_.push_back(std::move(s.out));
  for (Sequence& s : pending_) paused_.push_back(std::move(s.out));
  active_.clear();
  pending_.clear();
}

std::vector<int32_t> GenerationRun::any_over_ep(std::vector<int32_t> flags) const {
  if (!lockstep_) return flags;
  at::Tensor t = at::tensor(flags, at::kInt);
  lockstep_->all_reduce(t, dist::ReduceOp::kMax);
  for (size_t i = 0; i < flags.size(); ++i) flags[i] = t[int64_t(i)].item<int32_t>();
  return flags;
}

}  // namespace hpcrl::rollout
