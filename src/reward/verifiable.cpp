// Verifiable reward: extract → normalise → compare, plus the <think> format
// check (rules in verifiable.h). Pure string work, no torch: the rollout loop
// calls it once per sampled response.
#include "hpcrl/reward/verifiable.h"

#include <cmath>

#include "answer_braces.h"
#include "hpcrl/reward/answer_normalize.h"
#include "hpcrl/util/check.h"

namespace hpcrl::reward {
namespace {

constexpr const char* kOpen = "<think>";
constexpr const char* kClose = "</think>";

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + needle.size())) ++n;
  return n;
}

bool blank(const std::string& s, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    if (!detail::is_space(s[i])) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> answer_region(const std::string& response) {
  size_t close = response.rfind(kClose);
  if (close != std::string::npos) return response.substr(close + std::string(kClose).size());
  if (response.find(kOpen) != std::string::npos) return std::nullopt;
  return response;
}

bool think_format_ok(const std::string& response, const std::vector<Extractor>& order) {
  if (count(response, kClose) != 1) return false;
  size_t opens = count(response, kOpen);
  if (opens > 1) return false;
  size_t close = response.find(kClose);
  size_t think_begin = 0;
  if (opens == 1) {
    size_t open = response.find(kOpen);
    if (open > close || !blank(response, 0, open)) return false;
    think_begin = open + std::string(kOpen).size();
  }
  if (blank(response, think_begin, close)) return false;
  auto region = answer_region(response);
  return region && extract_answer(*region, order).has_value();
}

VerifiableReward::VerifiableReward(VerifiableRewardConfig config) : config_(std::move(config)) {
  HPCRL_CHECK_INPUT(!config_.extract.empty(),
                    "verifiable reward: `extract` is empty; list at least one of "
                        << "boxed, answer_tag, answer_is, hash, last_number");
  HPCRL_CHECK_INPUT(std::isfinite(config_.format_bonus) && config_.format_bonus >= 0.0,
                    "verifiable reward: format_bonus must be a finite number >= 0 (got " << config_.format_bonus
                                                                                        << ")");
  HPCRL_CHECK_INPUT(config_.rel_tol >= 0.0 && config_.rel_tol <= 0.1,
                    "verifiable reward: rel_tol must be in [0, 0.1] (got " << config_.rel_tol
                                                                           << "); the default is 1e-6");
}

RewardResult VerifiableReward::score(const std::string& response, const std::string& gold_answer) const {
  RewardResult r;
  r.format_ok = think_format_ok(response, config_.extract);
  if (auto region = answer_region(response)) {
    if (auto found = extract_answer(*region, config_.extract)) {
      r.extracted = found->answer;
      r.extractor = extractor_name(found->by);
      r.correct = answers_equivalent(normalize_answer(found->answer), normalize_answer(gold_answer),
                                     config_.rel_tol);
    }
  }
  r.score = (r.correct ? 1.0 : 0.0) + (r.format_ok ? config_.format_bonus : 0.0);
  return r;
}

}  // namespace hpcrl::reward
