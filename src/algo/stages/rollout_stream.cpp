// The generator's groups in flight across rounds (rollout_stream.h).
#include "hpcrl/algo/stages/rollout_stream.h"

#include <algorithm>

#include "hpcrl/algo/training/token_staleness.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

bool GroupInFlight::complete() const {
  for (const auto& s : samples)
    if (s.finish_reason.empty()) return false;
  return true;
}

void RolloutStream::add(const std::vector<size_t>& rows, const std::vector<std::vector<int32_t>>& prompt_ids,
                        const std::vector<int64_t>& keys) {
  HPCRL_CHECK(rows.size() == prompt_ids.size() && rows.size() == keys.size(),
              "RolloutStream::add: " << rows.size() << " rows, " << prompt_ids.size() << " prompts, " << keys.size()
                                     << " keys");
  for (size_t j = 0; j < rows.size(); ++j) {
    GroupInFlight g;
    g.example = rows[j];
    g.prompt_ids = prompt_ids[j];
    g.key = keys[j];
    g.samples.resize(size_t(group_));
    for (int64_t i = 0; i < group_; ++i) g.samples[size_t(i)].sample_index = i;
    g.versions.resize(size_t(group_));
    groups_.push_back(std::move(g));
  }
}

int64_t RolloutStream::complete() const {
  return std::count_if(groups_.begin(), groups_.end(), [](const GroupInFlight& g) { return g.complete(); });
}

RolloutStream::Call RolloutStream::next_call(int64_t groups) const {
  Call c;
  c.call.pause_after_groups = groups;
  for (size_t k = 0; k < groups_.size(); ++k) {
    const GroupInFlight& g = groups_[k];
    if (g.complete()) continue;
    const int64_t prompt = int64_t(c.prompts.size());
    c.prompts.push_back(g.prompt_ids);
    c.keys.push_back(g.key);
    c.examples.push_back(g.example);
    c.group_of_prompt.push_back(k);
    for (const auto& s : g.samples) {
      if (!s.finish_reason.empty()) continue;
      c.call.samples.push_back(s);
      c.call.samples.back().prompt_index = prompt;
    }
  }
  return c;
}

void RolloutStream::take(const Call& call, rollout::GenerationResult result, int64_t version) {
  for (auto* list : {&result.finished, &result.paused})
    for (rollout::Sample& s : *list) {
      GroupInFlight& g = groups_[call.group_of_prompt[size_t(s.prompt_index)]];
      auto& versions = g.versions[size_t(s.sample_index)];
      versions.resize(s.tokens.size(), int32_t(version));  // the tokens this call added
      g.samples[size_t(s.sample_index)] = std::move(s);
    }
}

std::vector<GroupInFlight> RolloutStream::take_complete(int64_t n) {
  std::vector<GroupInFlight> out;
  for (auto it = groups_.begin(); it != groups_.end() && int64_t(out.size()) < n;) {
    if (!it->complete()) {
      ++it;
      continue;
    }
    out.push_back(std::move(*it));
    it = groups_.erase(it);
  }
  return out;
}

int64_t RolloutStream::drop_stale(int64_t version, int64_t max_staleness) {
  int64_t dropped = 0;
  for (auto it = groups_.begin(); it != groups_.end();) {
    const bool stale = std::any_of(it->versions.begin(), it->versions.end(), [&](const std::vector<int32_t>& v) {
      return token_too_stale(v, version, max_staleness);
    });
    if (!stale) {
      ++it;
      continue;
    }
    dropped += group_;
    it = groups_.erase(it);
  }
  return dropped;
}

void RolloutStream::restore(std::vector<GroupInFlight> groups) {
  groups_.assign(std::make_move_iterator(groups.begin()), std::make_move_iterator(groups.end()));
}

}  // namespace hpcrl::algo
