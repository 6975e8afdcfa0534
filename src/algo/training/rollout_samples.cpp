// Appending samples (rollout_samples.h).
#include "hpcrl/algo/training/rollout_samples.h"

namespace hpcrl::algo {

void RolloutSamples::append(const RolloutSamples& o, size_t first, size_t count) {
  for (size_t k = first; k < first + count; ++k) {
    prompt_ids.push_back(o.prompt_ids[k]);
    response_ids.push_back(o.response_ids[k]);
    logprobs.push_back(o.logprobs[k]);
    versions.push_back(k < o.versions.size() ? o.versions[k] : std::vector<int32_t>{});
    sampled.push_back(k < o.sampled.size() ? o.sampled[k] : std::vector<uint8_t>{});
    example.push_back(o.example[k]);
    scores.push_back(o.scores[k]);
    truncated.push_back(o.truncated[k]);
  }
}

}  // namespace hpcrl::algo
