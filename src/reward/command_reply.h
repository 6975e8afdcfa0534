// One answer line of a `command` reward program, judged on its own: what the
// protocol (docs/rewards.md §8) expects is {"score": <finite number>} with an
// optional "index" that must be the sample's. Apart from command_reward.cpp
// so the parser of what an outside program prints can be fuzzed by itself.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hpcrl::reward {

// At most 300 bytes of `s` (without a final newline) for an error message,
// with the full size when cut.
std::string truncated(std::string_view s);

// The largest |score| a program may answer: the group statistics square scores.
inline constexpr double kMaxRewardScore = 1e30;

// What is wrong with `line` as the answer to sample `index` ("" when it is a
// valid answer; `score` is then set).
std::string reply_problem(const std::string& line, int64_t index, double& score);

}  // namespace hpcrl::reward
