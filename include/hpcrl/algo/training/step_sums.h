// Statistics a step accumulates on each rank and adds up over a group in one
// reduction: a struct of named double fields instead of slots of a tensor read
// by index. The struct's fields are the slots, so adding a metric is adding a
// field; pack() lays them into one float64 tensor for the all-reduce and
// unpack() reads them back.
#pragma once

#include <ATen/ATen.h>

#include <cstring>
#include <type_traits>

namespace hpcrl::algo {

// Precondition: Sums holds only double fields (no padding, no other members),
// so its bytes are exactly sizeof(Sums) / 8 doubles in declaration order.
template <class Sums>
constexpr int64_t sums_fields() {
  static_assert(std::is_standard_layout_v<Sums> && std::is_trivially_copyable_v<Sums>,
                "step sums are plain structs of doubles");
  static_assert(sizeof(Sums) % sizeof(double) == 0, "step sums are plain structs of doubles");
  return int64_t(sizeof(Sums) / sizeof(double));
}

// [fields] float64 on the CPU.
template <class Sums>
at::Tensor pack(const Sums& s) {
  at::Tensor t = at::empty({sums_fields<Sums>()}, at::kDouble);
  std::memcpy(t.data_ptr<double>(), &s, sizeof(Sums));
  return t;
}

// The inverse of pack() for a [fields] float64 tensor (on any device).
template <class Sums>
Sums unpack(const at::Tensor& t) {
  at::Tensor host = t.to(at::kCPU, at::kDouble).contiguous();
  Sums s;
  std::memcpy(static_cast<void*>(&s), host.data_ptr<double>(), sizeof(Sums));
  return s;
}

}  // namespace hpcrl::algo
