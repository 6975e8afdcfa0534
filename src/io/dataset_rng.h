// The one random generator of the io module's data code: splitmix64 with an
// unbiased bounded draw. Fully specified here (std::mt19937 is, but the
// std:: distributions and std::shuffle are not), so shuffles and generated
// problems are identical on every platform — a requirement for exact resume.
#pragma once

#include <cstdint>

namespace hpcrl::io::detail {

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias (bound ≥ 1).
inline uint64_t bounded(uint64_t& state, uint64_t bound) {
  uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    uint64_t r = splitmix64(state);
    if (r >= threshold) return r % bound;
  }
}

// An independent stream for (seed, salt): e.g. (run seed, epoch).
inline uint64_t stream_state(uint64_t seed, uint64_t salt) {
  uint64_t s = seed;
  uint64_t a = splitmix64(s);
  uint64_t t = salt ^ 0xD1B54A32D192ED03ULL;
  return a ^ splitmix64(t);
}

}  // namespace hpcrl::io::detail
