// Judging one answer line of a command reward (see command_reply.h).
#include "reward/command_reply.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "hpcrl/util/strings.h"

namespace hpcrl::reward {

namespace {
constexpr size_t kShowBytes = 300;  // how much of a line an error quotes
}  // namespace

std::string truncated(std::string_view s) {
  if (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  if (s.size() <= kShowBytes) return std::string(s);
  return std::string(s.substr(0, kShowBytes)) + "... (" + std::to_string(s.size()) + " bytes in all)";
}

std::string reply_problem(const std::string& line, int64_t index, double& score) {
  if (str::trim(line).empty()) return "is empty";
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return "is not JSON";
  if (j.is_number()) return "is a bare number; write it as {\"score\": " + str::trim(line) + "}";
  if (!j.is_object()) return "is not a JSON object";
  auto s = j.find("score");
  if (s == j.end()) return "has no \"score\" key";
  if (!s->is_number()) return "has a non-numeric \"score\" (" + truncated(s->dump()) + ")";
  score = s->get<double>();
  if (!std::isfinite(score)) return "has a score that is not finite";
  // Advantages square and subtract scores: beyond 1e30 the group statistics overflow to inf/NaN
  // and the run would stop later at a non-finite gradient blamed on the learning rate.
  if (std::fabs(score) > kMaxRewardScore)
    return "has a score of " + truncated(s->dump()) + ", beyond ±1e30 (scores are squared in the group's "
           "statistics and would overflow); scale the scores down";
  auto i = j.find("index");
  if (i != j.end() && (!i->is_number_integer() || i->get<int64_t>() != index))
    return "carries \"index\": " + truncated(i->dump()) + ", but the sample it answers is index " +
           std::to_string(index) + " (answers come in input order, one line each)";
  return "";
}

}  // namespace hpcrl::reward
