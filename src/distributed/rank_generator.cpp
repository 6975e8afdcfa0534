// Megatron-core's generate_masked_orthogonal_rank_groups in C++: a rank is
// sum_i digit_i · stride_i with stride_i the product of the sizes of the dims
// before i (fastest first). The masked dims enumerate the members of a group,
// the unmasked ones enumerate the groups.
#include "hpcrl/distributed/rank_generator.h"

#include <algorithm>

#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::dist {

RankGenerator::RankGenerator(const std::string& order, const std::vector<std::pair<std::string, int>>& sizes,
                             int first_rank)
    : first_rank_(first_rank) {
  names_ = str::split(order, '-');
  for (const auto& [name, size] : sizes) {
    HPCRL_CHECK(size >= 1, "dim '" << name << "' has size " << size);
    if (std::find(names_.begin(), names_.end(), name) == names_.end()) {
      HPCRL_CHECK(size == 1, "dim '" << name << "' (size " << size << ") is missing from order '" << order << "'");
      names_.push_back(name);
    }
  }
  for (const auto& name : names_) {
    HPCRL_CHECK(std::count(names_.begin(), names_.end(), name) == 1, "dim '" << name << "' repeats in order '" << order << "'");
    auto it = std::find_if(sizes.begin(), sizes.end(), [&](const auto& p) { return p.first == name; });
    HPCRL_CHECK(it != sizes.end(), "order '" << order << "' names dim '" << name << "' without a size");
    sizes_.push_back(it->second);
    world_size_ *= it->second;
  }
}

RankGroups RankGenerator::get(const std::string& token) const {
  const size_t nd = names_.size();
  std::vector<bool> mask(nd, false);
  for (const auto& t : str::split(token, '-')) {
    auto it = std::find(names_.begin(), names_.end(), t);
    HPCRL_CHECK(it != names_.end(), "group '" << token << "' names dim '" << t << "', which is not in order "
                                              << str::join(names_, "-"));
    mask[it - names_.begin()] = true;
  }
  std::vector<int> stride(nd);
  for (size_t i = 0, s = 1; i < nd; s *= sizes_[i], ++i) stride[i] = static_cast<int>(s);
  std::vector<int> in_shape, in_stride, out_shape, out_stride;
  for (size_t i = 0; i < nd; ++i) {
    (mask[i] ? in_shape : out_shape).push_back(sizes_[i]);
    (mask[i] ? in_stride : out_stride).push_back(stride[i]);
  }
  // Offset of mixed-radix index `index` over `shape` (fastest first) with strides `st`.
  auto place = [](int index, const std::vector<int>& shape, const std::vector<int>& st) {
    int rank = 0;
    for (size_t i = 0; i < shape.size(); ++i) {
      rank += (index % shape[i]) * st[i];
      index /= shape[i];
    }
    return rank;
  };
  int group_size = 1;
  for (int s : in_shape) group_size *= s;
  const int groups = world_size_ / group_size;
  RankGroups out(groups, std::vector<int>(group_size));
  for (int g = 0; g < groups; ++g) {
    const int base = place(g, out_shape, out_stride) + first_rank_;
    for (int k = 0; k < group_size; ++k) out[g][k] = base + place(k, in_shape, in_stride);
  }
  return out;
}

}  // namespace hpcrl::dist
