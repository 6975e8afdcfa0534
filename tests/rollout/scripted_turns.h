// A scripted multi-turn handler for the engine tests (rollout/turns.h): a
// turn ends on one of 6 of the random model's 96 ids, and the reply depends on
// which row asked and when, so every property of multi-turn generation can be
// checked against the same computation done another way.
#pragma once

#include <utility>
#include <vector>

#include "hpcrl/rollout/engine.h"

namespace hpcrl::testing {

// A turn ends on any of 6 of the random model's 96 ids (about 6 % a step), at
// most `max_turns` times a row; the reply is 3 tokens made of the row's
// prompt, sample and turn numbers, so it depends on which row asked. A reply
// becomes ready `delay_polls` polls after its call starts (0: at once).
class ScriptedTurns : public rollout::TurnHandler {
 public:
  explicit ScriptedTurns(int64_t delay_polls = 0, int64_t max_turns = 3) : delay_(delay_polls), max_turns_(max_turns) {}
  static bool is_call(int32_t id) { return id == 13 || id == 19 || id == 41 || id == 43 || id == 47 || id == 53; }
  bool ends_turn(const rollout::Sample& s) const override { return is_call(s.tokens.back()); }
  void start(int64_t ticket, const rollout::Sample& s) override {
    rollout::TurnReply reply;
    if (s.turns > max_turns_) reply.finish_reason = "turns";
    else reply.tokens = {int32_t(60 + s.prompt_index), int32_t(70 + s.sample_index), int32_t(80 + s.turns)};
    waiting_.push_back({ticket, delay_, std::move(reply)});
  }
  std::vector<std::pair<int64_t, rollout::TurnReply>> poll(bool wait) override {
    std::vector<std::pair<int64_t, rollout::TurnReply>> ready;
    for (auto& w : waiting_) --w.polls_left;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->polls_left <= 0 || (wait && ready.empty() && it == waiting_.begin())) {
        ready.emplace_back(it->ticket, std::move(it->reply));
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    return ready;
  }

 private:
  struct Waiting {
    int64_t ticket, polls_left;
    rollout::TurnReply reply;
  };
  const int64_t delay_, max_turns_;
  std::vector<Waiting> waiting_;
};

}  // namespace hpcrl::testing
