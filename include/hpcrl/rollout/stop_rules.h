// When a generated sequence ends: on an EOS id (the token is kept), when its
// text contains one of the stop strings (kept too: the tokens and their
// log-probs must stay aligned with what the model produced), or at
// max_new_tokens. Stop strings are matched on the decoded tail of the
// response only — long enough to hold the longest stop string — so checking
// after every token costs O(stop length), not O(response length).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace hpcrl::io {
class Tokenizer;
}

namespace hpcrl::rollout {

struct SamplingParams;

class StopRules {
 public:
  // `tokenizer` may be null when params.stop is empty.
  StopRules(const SamplingParams& params, const io::Tokenizer* tokenizer);

  // Called after each new token: "" (go on), "stop" (EOS or stop string) or "length".
  std::string check(const std::vector<int32_t>& tokens) const;

 private:
  bool tail_has_stop_string(const std::vector<int32_t>& tokens) const;

  std::set<int32_t> eos_;
  std::vector<std::string> stop_;
  size_t longest_stop_ = 0;  // bytes
  int64_t max_new_tokens_;
  const io::Tokenizer* tokenizer_;
};

}  // namespace hpcrl::rollout
