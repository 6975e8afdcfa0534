// Batch assembly for the training forward (see token_batch.h).
#include "hpcrl/algo/training/token_batch.h"

#include <algorithm>

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

int64_t TokenBatch::response_tokens() const {
  int64_t n = 0;
  for (auto r : response_lens) n += r;
  return n;
}

double TokenBatch::mean_row_tokens() const {
  if (prompt_lens.empty()) return 0;
  int64_t n = response_tokens();
  for (auto p : prompt_lens) n += p;
  return double(n) / double(prompt_lens.size());
}

TokenBatch make_token_batch(const std::vector<std::vector<int32_t>>& prompts,
                            const std::vector<std::vector<int32_t>>& responses, int32_t pad_id, int64_t multiple,
                            at::Device device, const std::vector<std::vector<uint8_t>>* sampled) {
  HPCRL_CHECK(prompts.size() == responses.size() && !prompts.empty(),
              prompts.size() << " prompts vs " << responses.size() << " responses");
  HPCRL_CHECK(!sampled || sampled->empty() || sampled->size() == prompts.size(),
              sampled->size() << " sampled-token marks for " << prompts.size() << " rows");
  const int64_t B = static_cast<int64_t>(prompts.size());
  int64_t T = 0;
  for (int64_t i = 0; i < B; ++i) T = std::max<int64_t>(T, prompts[i].size() + responses[i].size());
  T = (T + multiple - 1) / multiple * multiple;
  TokenBatch b;
  b.ids = at::full({B, T}, pad_id, at::kLong);
  b.targets = at::full({B, T}, pad_id, at::kLong);
  b.loss_mask = at::zeros({B, T}, at::kFloat);
  b.attention_mask = at::zeros({B, T}, at::kLong);
  auto ids = b.ids.accessor<int64_t, 2>();
  auto tgt = b.targets.accessor<int64_t, 2>();
  auto lm = b.loss_mask.accessor<float, 2>();
  auto am = b.attention_mask.accessor<int64_t, 2>();
  for (int64_t i = 0; i < B; ++i) {
    const int64_t P = prompts[i].size(), R = responses[i].size();
    HPCRL_CHECK(P > 0, "row " << i << " has an empty prompt");
    const std::vector<uint8_t>* marks = sampled && !sampled->empty() && !(*sampled)[i].empty() ? &(*sampled)[i] : nullptr;
    HPCRL_CHECK(!marks || int64_t(marks->size()) == R, "row " << i << " marks " << marks->size() << " of " << R
                                                            << " response tokens as sampled or inserted");
    for (int64_t t = 0; t < P + R; ++t) {
      ids[i][t] = t < P ? prompts[i][t] : responses[i][t - P];
      am[i][t] = 1;
      if (t > 0) tgt[i][t - 1] = ids[i][t];
      // Position t predicts token t+1: a response token when t+1 ≥ P.
      if (t + 1 >= P && t + 1 < P + R) lm[i][t] = !marks || (*marks)[t + 1 - P] ? 1.0f : 0.0f;
    }
    b.prompt_lens.push_back(P);
    b.response_lens.push_back(R);
  }
  if (!device.is_cpu()) {
    b.ids = b.ids.to(device);
    b.targets = b.targets.to(device);
    b.loss_mask = b.loss_mask.to(device);
    b.attention_mask = b.attention_mask.to(device);
  }
  return b;
}

std::vector<uint8_t> response_sampled(const TokenBatch& b, int64_t i) {
  const int64_t P = b.prompt_lens[size_t(i)], R = b.response_lens[size_t(i)];
  const at::Tensor mask = b.loss_mask[i].narrow(0, P - 1, R).to(at::kCPU);
  if (mask.min().item<float>() > 0) return {};
  std::vector<uint8_t> out;
  const auto m = mask.accessor<float, 1>();
  for (int64_t k = 0; k < R; ++k) out.push_back(m[k] > 0 ? 1 : 0);
  return out;
}

TokenBatch slice_rows(const TokenBatch& b, int64_t begin, int64_t end) {
  TokenBatch s;
  s.ids = b.ids.slice(0, begin, end);
  s.targets = b.targets.slice(0, begin, end);
  s.loss_mask = b.loss_mask.slice(0, begin, end);
  s.attention_mask = b.attention_mask.slice(0, begin, end);
  if (b.packed()) s.positions = b.positions.slice(0, begin, end);
  if (b.prompt_lens.empty()) return s;
  s.prompt_lens.assign(b.prompt_lens.begin() + begin, b.prompt_lens.begin() + end);
  s.response_lens.assign(b.response_lens.begin() + begin, b.response_lens.begin() + end);
  return s;
}

TokenBatch sequence_shard(const TokenBatch& b, int sp_rank, int sp_size) {
  if (sp_size == 1) return b;
  const int64_t T = b.ids.size(1);
  HPCRL_CHECK(T % sp_size == 0, "sequence length " << T << " is not a multiple of sp=" << sp_size);
  const int64_t chunk = T / sp_size, lo = sp_rank * chunk, hi = lo + chunk;
  TokenBatch s = b;
  s.ids = b.ids.slice(1, lo, hi);
  s.targets = b.targets.slice(1, lo, hi);
  s.loss_mask = b.loss_mask.slice(1, lo, hi);
  s.attention_mask = b.attention_mask.slice(1, lo, hi);
  if (b.packed()) s.positions = b.positions.slice(1, lo, hi);
  return s;
}

std::vector<std::vector<float>> response_values(const TokenBatch& b, const at::Tensor& values) {
  at::Tensor v = values.detach().to(at::kCPU, at::kFloat).contiguous();
  auto acc = v.accessor<float, 2>();
  std::vector<std::vector<float>> out(b.rows());
  for (int64_t i = 0; i < b.rows(); ++i) {
    const int64_t P = b.prompt_lens[i], R = b.response_lens[i];
    for (int64_t t = P - 1; t < P - 1 + R; ++t) out[i].push_back(acc[i][t]);
  }
  return out;
}

}  // namespace hpcrl::algo
