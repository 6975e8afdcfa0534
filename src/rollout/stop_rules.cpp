// Stop conditions of a generated sequence (stop_rules.h).
#include "hpcrl/rollout/stop_rules.h"

#include <algorithm>

#include "hpcrl/io/tokenizer.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

StopRules::StopRules(const SamplingParams& params, const io::Tokenizer* tokenizer)
    : eos_(params.eos_ids.begin(), params.eos_ids.end()), max_new_tokens_(params.max_new_tokens),
      tokenizer_(tokenizer) {
  for (const auto& s : params.stop) {
    HPCRL_CHECK_INPUT(!s.empty(), "an empty stop string would end every sample at its first token; remove it");
    stop_.push_back(s);
    longest_stop_ = std::max(longest_stop_, s.size());
  }
  HPCRL_CHECK_INPUT(stop_.empty() || tokenizer_, "stop strings need a tokenizer to decode the response");
}

bool StopRules::tail_has_stop_string(const std::vector<int32_t>& tokens) const {
  // A match not seen after the previous token must end in the newest one, so it
  // lies within the last longest_stop_ bytes. Byte-level tokens carry at least
  // one byte each (ids without a token carry none: widen until enough bytes),
  // and a few extra bytes absorb a UTF-8 character cut at the window's start.
  const size_t need = longest_stop_ + 4;
  size_t window = longest_stop_ + 1;
  for (;;) {
    window = std::min(window, tokens.size());
    std::vector<int32_t> tail(tokens.end() - static_cast<std::ptrdiff_t>(window), tokens.end());
    std::string text = tokenizer_->decode(tail);
    if (text.size() >= need || window == tokens.size()) {
      for (const auto& s : stop_)
        if (text.find(s) != std::string::npos) return true;
      return false;
    }
    window *= 2;
  }
}

std::string StopRules::check(const std::vector<int32_t>& tokens) const {
  if (!tokens.empty() && eos_.count(tokens.back())) return "stop";
  if (!stop_.empty() && !tokens.empty() && tail_has_stop_string(tokens)) return "stop";
  if (static_cast<int64_t>(tokens.size()) >= max_new_tokens_) return "length";
  return "";
}

}  // namespace hpcrl::rollout
