// Where each model role runs. Colocated: every role spans the whole world and
// the roles take turns (time-sliced). Disaggregated: each role, and a role's
// rollout engine ("<role>.rollout"), owns an inclusive world-rank range; ranges
// may be shared exactly (the roles take turns on them) but not partly overlap,
// and may not leave the world. A plain value type (role name -> range):
// the YAML module builds it from `placement:`, so dist does not depend on YAML.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace hpcrl::dist {

struct RankRange {
  int first = 0, last = 0;  // inclusive world ranks
  int size() const { return last - first + 1; }
  bool contains(int rank) const { return rank >= first && rank <= last; }
  bool operator==(const RankRange& o) const { return first == o.first && last == o.last; }
};

class Placement {
 public:
  enum class Mode { kColocated, kDisaggregated };

  // Every role on ranks [0, world - 1].
  static Placement colocated(int world);
  // InputError naming the role(s) and the fix when a range is empty (first >
  // last), negative, reaches past the world, or partly overlaps another one.
  static Placement disaggregated(int world, std::map<std::string, RankRange> ranges);

  Mode mode() const { return mode_; }
  int world() const { return world_; }
  // Ranges as given (empty when colocated).
  const std::map<std::string, RankRange>& ranges() const { return ranges_; }

  // The ranks of `role` ("policy", or "policy.rollout" for its generation
  // engine; a rollout without its own range runs on its role's ranks).
  // Disaggregated and not listed: InputError with a "did you mean" and the fix.
  RankRange range(const std::string& role) const;
  bool has(const std::string& role) const;
  bool is_member(const std::string& role, int world_rank) const { return range(role).contains(world_rank); }

  // Ranges of rollout engines end in this suffix.
  static constexpr const char* kRolloutSuffix = ".rollout";

 private:
  Mode mode_ = Mode::kColocated;
  int world_ = 1;
  std::map<std::string, RankRange> ranges_;
};

}  // namespace hpcrl::dist
