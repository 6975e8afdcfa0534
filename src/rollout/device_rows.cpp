// Device-side state of the live rows (device_rows.h).
#include "rollout/device_rows.h"

#include <torch/utils.h>

#include "hpcrl/rollout/engine.h"
#include "hpcrl/rollout/philox.h"

namespace hpcrl::rollout {

DeviceRows::DeviceRows(int64_t slots, int64_t interval, const SamplingParams& params, at::Device device,
                       bool draw_table)
    : max_new_tokens_(params.max_new_tokens), seed_(params.seed) {
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  last_ = at::zeros({slots}, longs);
  position_ = at::zeros({slots}, longs);
  generated_ = at::zeros({slots}, longs);
  count_ = at::zeros({slots}, longs);
  ended_ = at::zeros({slots}, longs.dtype(at::kBool));
  if (draw_table) {
    draw_ = at::zeros({slots}, longs);
    uniforms_ = at::zeros({slots, max_new_tokens_}, longs.dtype(at::kDouble));
  }
  log_ids_ = at::zeros({slots, interval + 1}, longs);
  log_logprobs_ = at::zeros({slots, interval + 1}, longs.dtype(at::kFloat));
  std::vector<int64_t> eos(params.eos_ids.begin(), params.eos_ids.end());
  eos_ = at::tensor(eos, at::kLong).to(device);
}

void DeviceRows::start(int64_t first, const std::vector<int64_t>& positions, const std::vector<int64_t>& generated,
                       const std::vector<DrawKey>& draws) {
  const int64_t n = int64_t(positions.size());
  position_.narrow(0, first, n).copy_(at::tensor(positions, at::kLong));
  generated_.narrow(0, first, n).copy_(at::tensor(generated, at::kLong));
  count_.narrow(0, first, n).zero_();
  ended_.narrow(0, first, n).fill_(false);
  if (!uniforms_.defined()) return;  // a dynamic step: the host keys its draws
  std::vector<int64_t> next(size_t(n), 0);
  for (int64_t i = 0; i < n; ++i) next[size_t(i)] = draws[size_t(i)].step;
  draw_.narrow(0, first, n).copy_(at::tensor(next, at::kLong));
  // Draw j of each row at column j: the draws it may still make, as draw_uniform gives them.
  at::Tensor table = at::zeros({n, max_new_tokens_}, at::kDouble);
  double* t = table.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) {
    const DrawKey& k = draws[size_t(i)];
    for (int64_t j = k.step; j < max_new_tokens_; ++j)
      t[i * max_new_tokens_ + j] = draw_uniform(seed_, k.prompt, k.sample, j);
  }
  uniforms_.narrow(0, first, n).copy_(table);
}

void DeviceRows::append(int64_t first, const at::Tensor& ids, const at::Tensor& logprobs) {
  const int64_t R = ids.size(0);
  at::Tensor ended = ended_.narrow(0, first, R), count = count_.narrow(0, first, R);
  at::Tensor generated = generated_.narrow(0, first, R);
  const at::Tensor live = ended.logical_not().to(at::kLong);
  // An ended row writes at its count too, but does not advance it: the entry is never read.
  const at::Tensor column = count.unsqueeze(1);
  log_ids_.narrow(0, first, R).scatter_(1, column, ids.unsqueeze(1));
  log_logprobs_.narrow(0, first, R).scatter_(1, column, logprobs.to(at::kFloat).unsqueeze(1));
  count.add_(live);
  generated.add_(live);
  if (uniforms_.defined()) draw_.narrow(0, first, R).add_(live);
  last_.narrow(0, first, R).copy_(ids);
  ended.logical_or_(ends(ids, generated));
}

void DeviceRows::append_at(const at::Tensor& rows, const at::Tensor& ids, const at::Tensor& logprobs) {
  // Each row's state is read, advanced and written back whole (index_copy_), so a row named twice writes
  // the same values twice instead of advancing twice.
  const at::Tensor ended = ended_.index_select(0, rows), count = count_.index_select(0, rows);
  const at::Tensor live = ended.logical_not().to(at::kLong);
  log_ids_.index_put_({rows, count}, ids);
  log_logprobs_.index_put_({rows, count}, logprobs.to(at::kFloat));
  count_.index_copy_(0, rows, count + live);
  const at::Tensor generated = generated_.index_select(0, rows) + live;
  generated_.index_copy_(0, rows, generated);
  if (uniforms_.defined()) draw_.index_copy_(0, rows, draw_.index_select(0, rows) + live);
  last_.index_copy_(0, rows, ids);
  ended_.index_copy_(0, rows, ended.logical_or(ends(ids, generated)));
}

at::Tensor DeviceRows::ends(const at::Tensor& ids, const at::Tensor& generated) const {
  at::Tensor ends = generated >= max_new_tokens_;
  // An [R, E] comparison: at::isin may sort and take unique ids for many EOS ids, which reads a size on
  // the host (no CUDA graph can hold that).
  if (eos_.numel() > 0) ends.logical_or_((ids.unsqueeze(1) == eos_.unsqueeze(0)).any(1));
  return ends;
}

void DeviceRows::feed(int64_t first, const at::Tensor& ids) {
  last_.narrow(0, first, ids.size(0)).copy_(ids);
}

void DeviceRows::advance(int64_t rows) { position_.narrow(0, 0, rows).add_(1); }

void DeviceRows::end_padded(int64_t B, const at::Tensor& padded) { ended_.narrow(0, 0, B).logical_or_(padded); }

void DeviceRows::advance_unpadded(int64_t B, const at::Tensor& padded) {
  position_.narrow(0, 0, B).add_(padded.logical_not().to(at::kLong));
}

at::Tensor DeviceRows::next_uniforms(int64_t B) const {
  // An ended row's index may have run past the table: it draws, and its token is never logged.
  const at::Tensor column = draw_.narrow(0, 0, B).clamp_max(max_new_tokens_ - 1).unsqueeze(1);
  return uniforms_.narrow(0, 0, B).gather(1, column).squeeze(1);
}

at::Tensor DeviceRows::next_uniforms_at(const at::Tensor& rows) const {
  const at::Tensor column = draw_.index_select(0, rows).clamp_max(max_new_tokens_ - 1).unsqueeze(1);
  return uniforms_.index_select(0, rows).gather(1, column).squeeze(1);
}

DeviceRows::Log DeviceRows::take_log(int64_t rows) {
  // A copy even on the CPU: the device tensors are overwritten by the next steps.
  auto host = [](const at::Tensor& t) { return t.to(at::kCPU, t.scalar_type(), false, /*copy=*/true); };
  Log log{host(count_.narrow(0, 0, rows)), host(log_ids_.narrow(0, 0, rows)), host(log_logprobs_.narrow(0, 0, rows))};
  count_.narrow(0, 0, rows).zero_();
  return log;
}

void DeviceRows::reset(uint64_t seed) {
  seed_ = seed;
  count_.zero_();
  ended_.fill_(true);
}

void DeviceRows::move(int64_t from, int64_t to) {
  if (from != to) move(std::vector<int64_t>{from}, std::vector<int64_t>{to});
}

void DeviceRows::move(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.empty()) return;
  const at::Tensor s = at::tensor(from, at::kLong).to(last_.device()), t = at::tensor(to, at::kLong).to(last_.device());
  for (at::Tensor* state : {&last_, &position_, &generated_, &ended_, &draw_, &uniforms_})
    if (state->defined()) state->index_copy_(0, t, state->index_select(0, s));
}

}  // namespace hpcrl::rollout
