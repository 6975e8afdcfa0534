// Multi-turn rows of a generation call (turns.h): a row whose last token ended
// a turn leaves the decoding rows [0, active) for a parked slot at the top of
// the slot range, keeping its cache; its call runs while the others decode;
// its reply is prefilled into that cache after the row's tokens and the row
// joins the decoding rows again. The row's last sampled token was never fed
// to the model (a decode step feeds the previous step's token), so the cache
// is cut back to hold the tokens before it, and the reply's prefill feeds it
// first: what the cache ends with is what a forward of the whole trajectory
// computes.
#include <torch/utils.h>

#include <chrono>
#include <utility>

#include "hpcrl/trace/trace.h"
#include "rollout/generation_run.h"

namespace hpcrl::rollout {

void GenerationRun::park_turns() {
  for (int64_t r = int64_t(active_.size()) - 1; r >= 0; --r) {
    if (!active_[r].ends_turn) continue;
    Sequence& s = active_[r];
    s.ends_turn = false;
    s.ticket = next_ticket_++;
    ++s.out.turns;
    ++stats_.turn_calls;
    turns_->start(s.ticket, s.out);
    // The cache keeps the tokens before the last (which the reply's prefill feeds),
    // dropping any a later decode step wrote past the turn's end.
    slots_.set_length(r, s.prompt_length + int64_t(s.out.tokens.size()) - 1);
    const int64_t last = int64_t(active_.size()) - 1;
    if (r != last) {
      slots_.swap(r, last);
      rows_.move(last, r);
      std::swap(active_[r], active_[last]);
    }
    slots_.move(last, slot_count_ - 1 - int64_t(parked_.size()));  // the top free slot (>= last)
    parked_.push_back(std::move(active_.back()));
    active_.pop_back();
  }
}

std::vector<bool> GenerationRun::ready_over_tp() const {
  std::vector<int32_t> flags;
  for (const Sequence& s : parked_) flags.push_back(replies_.count(s.ticket) ? 1 : 0);
  if (tp_ && !flags.empty()) {
    at::Tensor t = at::tensor(flags, at::kInt);
    tp_->all_reduce(t, dist::ReduceOp::kMin);
    for (size_t i = 0; i < flags.size(); ++i) flags[i] = t[int64_t(i)].item<int32_t>();
  }
  return std::vector<bool>(flags.begin(), flags.end());
}

void GenerationRun::take_replies() {
  bool missing = false;
  for (const Sequence& s : parked_) missing = missing || !replies_.count(s.ticket);
  // Nothing to decode and nothing to admit: wait for a reply instead of spinning.
  const bool idle = active_.empty() && (pending_.empty() || free_slots() == 0);
  const auto start = std::chrono::steady_clock::now();
  for (auto& [ticket, reply] : turns_->poll(idle && missing)) replies_.emplace(ticket, std::move(reply));
  if (idle && missing)
    stats_.call_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<bool> ready = ready_over_tp();
  // From the back: resume_turn moves the last parked row into the hole, which was already looked at.
  for (size_t i = parked_.size(); i-- > 0;) {
    if (!ready[i]) continue;
    auto node = replies_.extract(parked_[i].ticket);
    resume_turn(i, std::move(node.mapped()));
  }
}

void GenerationRun::resume_turn(size_t i, TurnReply reply) {
  const int64_t low = slot_count_ - int64_t(parked_.size());  // the lowest parked slot
  if (i + 1 != parked_.size()) {
    slots_.swap(slot_count_ - 1 - int64_t(i), low);
    std::swap(parked_[i], parked_.back());
  }
  Sequence s = std::move(parked_.back());
  parked_.pop_back();
  const int64_t room = params_.max_new_tokens - int64_t(s.out.tokens.size());
  // The reply and at least one sampled token after it must fit max_new_tokens.
  if (reply.finish_reason.empty() && int64_t(reply.tokens.size()) >= room) reply.finish_reason = "length";
  if (!reply.finish_reason.empty()) {
    s.out.finish_reason = reply.finish_reason;
    finished(std::move(s.out));
    return;
  }
  trace::TimedSpan span("rollout/reply");
  span.add_arg("tokens", double(reply.tokens.size()));
  const int64_t row = int64_t(active_.size());
  slots_.move(low, row);
  std::vector<int32_t> fed{s.out.tokens.back()};
  fed.insert(fed.end(), reply.tokens.begin(), reply.tokens.end());
  if (s.out.sampled.empty()) s.out.sampled.assign(s.out.tokens.size(), 1);
  for (int32_t id : reply.tokens) {
    s.out.tokens.push_back(id);
    s.out.logprobs.push_back(0.0f);
    s.out.sampled.push_back(0);
  }
  s.inserted += int64_t(reply.tokens.size());
  stats_.reply_tokens += int64_t(reply.tokens.size());
  at::Tensor logits = forward_.extend(slots_, row, fed);
  ++stats_.forward_calls;
  ++stats_.prefill_forwards;
  rows_.start(row, {slots_.length(row)}, {int64_t(s.out.tokens.size())});
  active_.push_back(std::move(s));
  choose(logits, row);
  stats_.prefill_seconds += span.elapsed_seconds();
}

}  // namespace hpcrl::rollout
