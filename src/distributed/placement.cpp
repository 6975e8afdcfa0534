// Validation and lookup of role placement (see placement.h). Errors name the
// ranges involved as the user wrote them ([first, last], inclusive).
#include "hpcrl/distributed/placement.h"

#include <sstream>

#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::dist {
namespace {

std::string show(const std::string& role, const RankRange& r) {
  std::ostringstream os;
  os << role << ": [" << r.first << ", " << r.last << "]";
  return os.str();
}

}  // namespace

Placement Placement::colocated(int world) {
  HPCRL_CHECK_INPUT(world >= 1, "placement needs a world of at least one rank (got " << world << ")");
  Placement p;
  p.mode_ = Mode::kColocated;
  p.world_ = world;
  return p;
}

Placement Placement::disaggregated(int world, std::map<std::string, RankRange> ranges) {
  HPCRL_CHECK_INPUT(world >= 1, "placement needs a world of at least one rank (got " << world << ")");
  HPCRL_CHECK_INPUT(!ranges.empty(), "placement.mode is disaggregated but placement.ranges is empty; give each role "
                                     "an inclusive range, e.g. {policy: [0, 3], policy.rollout: [4, 7]}");
  for (const auto& [role, r] : ranges) {
    HPCRL_CHECK_INPUT(r.first >= 0 && r.first <= r.last,
                      "placement.ranges." << show(role, r) << " is not a range: use [first, last] with "
                                          << "0 <= first <= last (both inclusive)");
    HPCRL_CHECK_INPUT(r.last < world, "placement.ranges." << show(role, r) << " reaches past the world of " << world
                                                          << " ranks (0-" << world - 1 << "); launch at least "
                                                          << r.last + 1 << " ranks or shrink the range");
  }
  for (auto a = ranges.begin(); a != ranges.end(); ++a)
    for (auto b = std::next(a); b != ranges.end(); ++b)
      HPCRL_CHECK_INPUT(a->second == b->second || a->second.last < b->second.first || b->second.last < a->second.first,
                        "placement.ranges " << show(a->first, a->second) << " and " << show(b->first, b->second)
                                            << " partly overlap; give the two roles the same range (they take turns "
                                            << "on it) or disjoint ones");
  Placement p;
  p.mode_ = Mode::kDisaggregated;
  p.world_ = world;
  p.ranges_ = std::move(ranges);
  return p;
}

bool Placement::has(const std::string& role) const {
  if (mode_ == Mode::kColocated || ranges_.count(role)) return true;
  return str::ends_with(role, kRolloutSuffix) && ranges_.count(role.substr(0, role.size() - std::string(kRolloutSuffix).size()));
}

RankRange Placement::range(const std::string& role) const {
  if (mode_ == Mode::kColocated) return {0, world_ - 1};
  auto it = ranges_.find(role);
  if (it != ranges_.end()) return it->second;
  const std::string suffix = kRolloutSuffix;
  if (str::ends_with(role, suffix)) {
    auto owner = ranges_.find(role.substr(0, role.size() - suffix.size()));
    if (owner != ranges_.end()) return owner->second;
  }
  std::vector<std::string> names;
  for (const auto& [name, r] : ranges_) names.push_back(name);
  std::string guess = str::closest(role, names);
  std::ostringstream os;
  os << "placement.ranges has no range for '" << role << "'";
  if (!guess.empty()) os << " (did you mean '" << guess << "'?)";
  os << "; disaggregated placement needs one per role, e.g. " << role << ": [first, last]. Given: "
     << str::join(names, ", ");
  throw InputError(os.str());
}

}  // namespace hpcrl::dist
