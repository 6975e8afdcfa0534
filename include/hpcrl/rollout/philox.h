// Philox4x32-10 (Salmon, Moraes, Dror & Shaw, SC'11), the counter-based
// generator behind the engine's draws: a pure function of a 128-bit counter and
// a 64-bit key, so the random number at (seed, prompt, sample, step) needs no
// state carried between steps and does not depend on which other sequences
// share a batch, on their slots, or on the device the logits are on.
#pragma once

#include <array>
#include <cstdint>

namespace hpcrl::rollout {

using PhiloxBlock = std::array<uint32_t, 4>;

// Ten rounds of Philox4x32 over `counter` with `key` (Random123's philox4x32_10).
inline PhiloxBlock philox4x32_10(PhiloxBlock counter, std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kM0) * counter[0], p1 = uint64_t(kM1) * counter[2];
    counter = {uint32_t(p1 >> 32) ^ counter[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ counter[3] ^ key[1],
               uint32_t(p0)};
    key = {key[0] + kW0, key[1] + kW1};
  }
  return counter;
}

// A uniform double in [0, 1) (53 random bits) for token `step` of sample
// `sample` of global prompt `prompt` under `seed`.
inline double draw_uniform(uint64_t seed, int64_t prompt, int64_t sample, int64_t step) {
  const uint64_t p = uint64_t(prompt);
  const PhiloxBlock out = philox4x32_10({uint32_t(step), uint32_t(sample), uint32_t(p), uint32_t(p >> 32)},
                                        {uint32_t(seed), uint32_t(seed >> 32)});
  const uint64_t bits = ((uint64_t(out[0]) << 32) | out[1]) >> 11;
  return double(bits) * (1.0 / 9007199254740992.0);  // 2^-53
}

}  // namespace hpcrl::rollout
