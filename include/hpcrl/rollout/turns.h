// Multi-turn generation: the engine's side of tool use. A row whose tokens end a
// turn (the model closed a tool call) stops decoding and keeps its KV slot; the
// call runs while the other rows keep decoding; when its reply is ready, the
// reply's tokens (the tool's answer wrapped by the chat template) are prefilled
// into the row's own cache after its tokens, and the row decodes on. The
// inserted tokens are part of the sample (Sample::sampled marks them) but were
// not sampled: they carry no log-prob and no draw — a sample's k-th own token
// draws Philox(seed; prompt, sample, k) whatever replies came before, so a
// trajectory is the same at any batch size and layout.
//
// What a call is, how it runs and what its reply says belong to the handler
// (hpcrl/tools/tool_turns.h); the engine knows only turns, tickets and tokens.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hpcrl::rollout {

struct Sample;

// What ends a turn's wait.
struct TurnReply {
  std::vector<int32_t> tokens;  // inserted after the row's tokens (not sampled), then the row decodes on
  std::string finish_reason;    // non-empty: the row ends here instead ("tool_error", "turns", "done"), nothing inserted
  double reward = 0;            // added to the sample's turn_reward (an environment's reward for the step)
};

class TurnHandler {
 public:
  virtual ~TurnHandler() = default;
  // Asked after each token a host sync reads: whether `sample` now ends a turn
  // (its last token closes a call). The engine then drops what the row produced
  // after it and parks the row.
  virtual bool ends_turn(const Sample& sample) const = 0;
  // The parked row's call starts; it may run in the background. `ticket` names it in poll().
  virtual void start(int64_t ticket, const Sample& sample) = 0;
  // Replies ready now, each once. With `wait`, blocks until at least one is
  // (the engine has nothing else to run).
  virtual std::vector<std::pair<int64_t, TurnReply>> poll(bool wait) = 0;
};

}  // namespace hpcrl::rollout
