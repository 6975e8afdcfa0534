// Rank groups from an order string, with Megatron-core's RankGenerator
// semantics: "tp-sp-dp-pp" lists the dims fastest first, so a rank's
// coordinates are its mixed-radix digits in that order. get("tp") returns the
// groups whose members differ only in tp (consecutive ranks); get("dp-sp")
// those that differ in dp and sp, members ordered by the order string (sp
// varies fastest), groups ordered by the remaining dims (fastest first).
// Ranks are offset by `first_rank`, so a role placed on ranks 8-15 gets world ranks.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace hpcrl::dist {

using RankGroups = std::vector<std::vector<int>>;

class RankGenerator {
 public:
  // `sizes`: (dim name, size) for every dim in `order`; dims of size 1 may be
  // left out of `order` (they are appended). RuntimeError on a malformed order.
  RankGenerator(const std::string& order, const std::vector<std::pair<std::string, int>>& sizes, int first_rank = 0);

  // Groups over the dims named in `token` ("tp", "dp-sp", "tp-pp", ...).
  RankGroups get(const std::string& token) const;
  int world_size() const { return world_size_; }
  const std::vector<std::string>& order() const { return names_; }

 private:
  std::vector<std::string> names_;  // fastest first
  std::vector<int> sizes_;
  int world_size_ = 1;
  int first_rank_ = 0;
};

}  // namespace hpcrl::dist
