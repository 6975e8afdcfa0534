// Multi-turn rows of a generation call (turns.h): a row whose last token ended
// a turn leaves the decoding rows [0, active) for a parked slot at the top of
// the slot range, keeping its cache; its call runs while the others decode;
// the replies ready at an iteration are prefilled into their rows' caches
// after the rows' tokens, together in one forward, and the rows join the
// decoding rows again. The row's last sampled token was never fed
// to the model (a decode step feeds the previous step's token), so the cache
// is cut back to hold the tokens before it, and the reply's prefill feeds it
// first: what the cache ends with is what a forward of the whole trajectory
// computes.
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "hpcrl/rollout/dispatch_counter.h"
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

void GenerationRun::resume_replies() {
  Resumed resumed = parked_.empty() ? Resumed{} : take_replies();
  const auto batches = resumed.batches();
  const int32_t forwards = int32_t(batches.size());
  resume(std::move(resumed), batches, any_over_ep({forwards})[0]);  // the most any rank of the ep group runs
}

GenerationRun::Resumed GenerationRun::take_replies() {
  bool missing = false;
  for (const Sequence& s : parked_) missing = missing || !replies_.count(s.ticket);
  // Nothing to decode and nothing to admit: wait for a reply instead of spinning.
  const bool idle = active_.empty() && (pending_.empty() || free_slots() == 0);
  const auto start = std::chrono::steady_clock::now();
  for (auto& [ticket, reply] : turns_->poll(idle && missing)) replies_.emplace(ticket, std::move(reply));
  if (idle && missing)
    stats_.call_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<bool> ready = ready_over_tp();
  // From the back: unpark moves the last parked row into the hole, which was already looked at.
  Resumed resumed;
  for (size_t i = parked_.size(); i-- > 0;) {
    if (!ready[i]) continue;
    TurnReply reply = taken_reply(parked_[i]);
    const bool ends = !reply.finish_reason.empty();
    Sequence s = unpark(i, ends ? -1 : int64_t(active_.size() + resumed.rows.size()));
    if (ends) {
      s.out.finish_reason = reply.finish_reason;
      finished(std::move(s.out));
    } else {
      resumed.add(std::move(s), reply.tokens);
    }
  }
  return resumed;
}

GenerationRun::Sequence GenerationRun::unpark(size_t i, int64_t to) {
  const int64_t low = slot_count_ - int64_t(parked_.size());  // the lowest parked slot
  if (i + 1 != parked_.size()) {
    slots_.swap(slot_count_ - 1 - int64_t(i), low);
    std::swap(parked_[i], parked_.back());
  }
  Sequence s = std::move(parked_.back());
  parked_.pop_back();
  if (to >= 0) slots_.move(low, to);  // to <= low: live rows and parked ones never share a slot
  return s;
}

void GenerationRun::Sequence::append_reply(const std::vector<int32_t>& reply) {
  if (out.sampled.empty()) out.sampled.assign(out.tokens.size(), 1);
  for (int32_t id : reply) {
    out.tokens.push_back(id);
    out.logprobs.push_back(0.0f);
    out.sampled.push_back(0);
  }
  inserted += int64_t(reply.size());
}

TurnReply GenerationRun::taken_reply(Sequence& s) {
  TurnReply reply = std::move(replies_.extract(s.ticket).mapped());
  s.out.turn_reward += reply.reward;
  // The reply and at least one sampled token after it must fit max_new_tokens.
  const int64_t room = params_.max_new_tokens - int64_t(s.out.tokens.size());
  if (reply.finish_reason.empty() && int64_t(reply.tokens.size()) >= room) reply.finish_reason = "length";
  return reply;
}

void GenerationRun::Resumed::add(Sequence s, const std::vector<int32_t>& reply) {
  std::vector<int32_t> tokens{s.out.tokens.back()};  // fed again: a decode step had not fed it yet
  tokens.insert(tokens.end(), reply.begin(), reply.end());
  s.append_reply(reply);
  rows.push_back(std::move(s));
  fed.push_back(std::move(tokens));
}

void GenerationRun::finish_calls() {
  // Every reply of this rank (the ranks of a tp group wait for the same calls and append the same replies).
  auto missing = [&] {
    for (const Sequence& s : parked_)
      if (!replies_.count(s.ticket)) return true;
    return false;
  };
  while (missing())
    for (auto& [ticket, reply] : turns_->poll(/*wait=*/true)) replies_.emplace(ticket, std::move(reply));
  while (!parked_.empty()) {
    TurnReply reply = taken_reply(parked_.back());
    Sequence s = unpark(parked_.size() - 1, -1);
    if (!reply.finish_reason.empty()) {
      s.out.finish_reason = reply.finish_reason;
      finished(std::move(s.out));
      continue;
    }
    s.append_reply(reply.tokens);  // nothing is prefilled: a continuation prefills prompt + tokens
    paused_.push_back(std::move(s.out));
  }
}

std::vector<std::pair<size_t, size_t>> GenerationRun::Resumed::batches() const {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t begin = 0; begin < fed.size();) {
    size_t end = begin, longest = 0;
    while (end < fed.size() &&
           int64_t(end + 1 - begin) * int64_t(std::max(longest, fed[end].size())) <= SlotForward::kPrefillTokens)
      longest = std::max(longest, fed[end++].size());
    if (end == begin) ++end;  // one reply past a prefill: extend() refuses it with the sizes
    out.emplace_back(begin, end);
    begin = end;
  }
  return out;
}

void GenerationRun::resume(Resumed r, const std::vector<std::pair<size_t, size_t>>& batches,
                           int64_t group_forwards) {
  for (int64_t i = int64_t(batches.size()); i < group_forwards; ++i) forward_.idle_step();  // another ep rank's
  if (batches.empty()) return;
  trace::TimedSpan span("rollout/reply");
  const DispatchTally dispatches(stats_.prefill_dispatches);
  span.add_arg("rows", double(r.rows.size()));
  // The rows' slots follow the live rows in order.
  for (const auto& [begin, end] : batches) {
    const int64_t first = int64_t(active_.size());
    const std::vector<std::vector<int32_t>> fed(r.fed.begin() + int64_t(begin), r.fed.begin() + int64_t(end));
    at::Tensor logits = forward_.extend(slots_, first, fed);
    ++stats_.forward_calls;
    ++stats_.prefill_forwards;
    for (size_t k = begin; k < end; ++k) {
      stats_.reply_tokens += int64_t(r.fed[k].size()) - 1;
      active_.push_back(std::move(r.rows[k]));
    }
    start_rows(first);
    choose(logits, first);
  }
  stats_.prefill_seconds += span.elapsed_seconds();
}

}  // namespace hpcrl::rollout
