// The small CPU profile the cost tests work their expected numbers out against:
// 30 GFLOP/s, 10 GB/s, 2 µs per op, two devices per node on a 2 GB/s, 1 µs link
// (cli_estimate_test.cpp writes the same profile as a YAML file).
#pragma once

#include <string>

#include "hpcrl/cost/hardware_profile.h"
#include "hpcrl/util/error.h"

namespace cost_test {

// The message parse_profile throws for `text` read as x.yaml ("no error" when it loads).
inline std::string profile_error(const std::string& text) {
  try {
    hpcrl::cost::parse_profile(text, "x.yaml");
  } catch (const hpcrl::InputError& e) {
    return e.what();
  }
  return "no error";
}

inline hpcrl::cost::HardwareProfile test_cpu() {
  hpcrl::cost::HardwareProfile p;
  p.name = "test-cpu";
  p.path = "test-cpu.yaml";
  p.peak_flops = 30e9;
  p.memory_bandwidth = 10e9;
  p.memory_capacity = 16e9;
  p.kernel_overhead_s = 2e-6;
  p.gpus_per_node = 2;
  p.intra_node = p.inter_node = {2e9, 1e-6};
  return p;
}

}  // namespace cost_test
