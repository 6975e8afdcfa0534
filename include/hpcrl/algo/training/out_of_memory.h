// An allocator's failure among LibTorch's errors (CPU: "can't allocate memory", as in
// "[enforce fail at alloc_cpu.cpp] ... DefaultCPUAllocator: can't allocate memory"; CUDA:
// "out of memory"), so that the code that knows what it was building can say so.
#pragma once

#include <c10/util/Exception.h>

#include <string>

namespace hpcrl::algo {

inline bool is_out_of_memory(const c10::Error& e) {
  const std::string m = e.what_without_backtrace();
  return m.find("can't allocate memory") != std::string::npos || m.find("out of memory") != std::string::npos;
}

}  // namespace hpcrl::algo
