// Micro-batch planning, trimming and packing (see micro_batches.h).
#include "hpcrl/algo/training/micro_batches.h"

#include <algorithm>

#include "hpcrl/parallel/sequence/ulysses.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {

// Rows [begin, end) of b in their micro-batch layout: one row per sequence, or
// sequences packed first-fit (in order) into rows of `capacity` tokens.
MicroBatch lay_out(const TokenBatch& b, int64_t begin, int64_t end, const std::vector<int64_t>& len,
                   const MicroBatchOptions& o) {
  const int64_t T = b.ids.size(1);
  const int64_t longest = *std::max_element(len.begin() + begin, len.begin() + end);
  std::vector<std::vector<int64_t>> rows;  // sequences of each row
  std::vector<int64_t> fill;
  const int64_t capacity = o.pack && o.max_tokens > 0 ? std::max(o.max_tokens, longest) : longest;
  for (int64_t i = begin; i < end; ++i) {
    size_t r = 0;
    if (o.pack)
      while (r < rows.size() && fill[r] + len[i] > capacity) ++r;
    else
      r = rows.size();
    if (r == rows.size()) {
      rows.emplace_back();
      fill.push_back(0);
    }
    rows[r].push_back(i);
    fill[r] += len[i];
  }
  const int64_t R = static_cast<int64_t>(rows.size());
  const int64_t used = *std::max_element(fill.begin(), fill.end());
  const int64_t L = (used + o.multiple - 1) / o.multiple * o.multiple;

  at::Tensor source = at::full({R, L}, -1, at::kLong);
  at::Tensor positions = at::zeros({R, L}, at::kLong);
  at::Tensor segments = at::zeros({R, L}, at::kLong);
  auto src = source.accessor<int64_t, 2>();
  auto pos = positions.accessor<int64_t, 2>();
  auto seg = segments.accessor<int64_t, 2>();
  for (int64_t r = 0; r < R; ++r) {
    int64_t offset = 0, id = 1;
    for (int64_t i : rows[r]) {
      for (int64_t t = 0; t < len[i]; ++t) {
        src[r][offset + t] = i * T + t;
        pos[r][offset + t] = t;
        seg[r][offset + t] = id;
      }
      offset += len[i];
      ++id;
    }
  }
  const at::Device device = b.ids.device();
  MicroBatch mb;
  mb.begin = begin;
  mb.end = end;
  mb.source = source.to(device);
  mb.tokens.ids = mb.gather(b.ids);
  mb.tokens.targets = mb.gather(b.targets);
  mb.tokens.loss_mask = mb.gather(b.loss_mask);
  if (o.pack) {
    mb.tokens.attention_mask = segments.to(device);
    mb.tokens.positions = positions.to(device);
  } else {
    mb.tokens.attention_mask = mb.gather(b.attention_mask);
    mb.tokens.prompt_lens.assign(b.prompt_lens.begin() + begin, b.prompt_lens.begin() + end);
    mb.tokens.response_lens.assign(b.response_lens.begin() + begin, b.response_lens.begin() + end);
  }
  return mb;
}

}  // namespace

MicroBatchOptions micro_batch_options(const config::TrainHparams& train, int64_t multiple) {
  return {train.micro_batch, train.micro_batch_tokens, train.packing, std::max<int64_t>(1, multiple)};
}

at::Tensor MicroBatch::gather(const at::Tensor& batch_values) const {
  if (!batch_values.defined()) return batch_values;
  HPCRL_CHECK(batch_values.dim() >= 2, "per-token values must be [B, T, ...], got " << batch_values.sizes());
  std::vector<int64_t> shape = source.sizes().vec();  // [R, L, ...]
  for (int64_t d = 2; d < batch_values.dim(); ++d) shape.push_back(batch_values.size(d));
  const at::Tensor idx = source.clamp_min(0).reshape({-1}).to(batch_values.device());
  at::Tensor out = batch_values.flatten(0, 1).index_select(0, idx).view(shape);
  at::Tensor padding = (source < 0).to(batch_values.device());
  while (padding.dim() < out.dim()) padding = padding.unsqueeze(-1);
  return out.masked_fill(padding, 0);
}

at::Tensor MicroBatch::gather_chunk(const at::Tensor& batch_values, const dist::CommPtr& sp) const {
  return batch_values.defined() ? parallel::sequence::sequence_chunk(gather(batch_values), sp) : batch_values;
}

at::Tensor MicroBatch::scatter(const at::Tensor& values, int64_t T) const {
  HPCRL_CHECK(values.dim() >= 2 && values.size(0) == source.size(0) && values.size(1) == source.size(1),
              "values " << values.sizes() << " are not in this micro-batch's layout " << source.sizes());
  const at::Tensor src = source.reshape({-1}).to(values.device());
  const at::Tensor kept = (src >= 0).nonzero().squeeze(1);  // positions holding a token
  std::vector<int64_t> shape{(end - begin) * T};
  for (int64_t d = 2; d < values.dim(); ++d) shape.push_back(values.size(d));
  at::Tensor out = at::zeros(shape, values.options());
  out.index_copy_(0, src.index_select(0, kept) - begin * T, values.flatten(0, 1).index_select(0, kept));
  shape[0] = end - begin;
  shape.insert(shape.begin() + 1, T);
  return out.view(shape);
}

std::vector<MicroBatch> plan_micro_batches(const TokenBatch& b, const MicroBatchOptions& o) {
  const int64_t B = b.rows();
  HPCRL_CHECK(!b.packed() && static_cast<int64_t>(b.prompt_lens.size()) == B,
              "micro-batches are planned from a right-padded batch with its row lengths");
  std::vector<int64_t> len(B);
  for (int64_t i = 0; i < B; ++i) len[i] = b.prompt_lens[i] + b.response_lens[i];
  std::vector<MicroBatch> out;
  for (int64_t begin = 0; begin < B;) {
    int64_t end = begin + 1, sum = len[begin], longest = len[begin];
    for (; end < B; ++end) {
      const int64_t n = end - begin + 1, s = sum + len[end], l = std::max(longest, len[end]);
      if (o.max_rows > 0 && n > o.max_rows) break;
      if (o.max_tokens > 0 && (o.pack ? s : n * l) > o.max_tokens) break;
      sum = s;
      longest = l;
    }
    out.push_back(lay_out(b, begin, end, len, o));
    begin = end;
  }
  return out;
}

at::Tensor forward_per_token(Role& role, const TokenBatch& b, MicroBatchOptions micro, const PerTokenHead& head) {
  HPCRL_CHECK(b.rows() > 0 && role.model->is_whole(), "a forward-only pass needs rows and a whole (pp = 1) model");
  at::NoGradGuard no_grad;
  const int sp = role.ctx.sp_size();
  micro.multiple = sp;  // this role's sp, which may differ from the batch maker's
  std::vector<at::Tensor> parts;
  for (const MicroBatch& mb : plan_micro_batches(b, micro)) {
    TokenBatch sb = sequence_shard(mb.tokens, role.ctx.sp_rank(), sp);
    at::Tensor out = head(forward_tokens(*role.model, sb).hidden, sb);  // [R, L/sp, ...]
    out = dist::all_gather(role.ctx.sp, out, 1);
    parts.push_back(mb.scatter(out, b.ids.size(1)));
  }
  return at::cat(parts, 0);  // [B, T, ...]
}

model::ForwardOutput forward_tokens(model::DecoderModel& m, const TokenBatch& sb) {
  return m.forward(sb.ids, sb.positions, sb.packed() ? sb.attention_mask : at::Tensor());
}

model::StageBatch stage_batch(const TokenBatch& sb) {
  return {sb.ids, sb.positions, sb.packed() ? sb.attention_mask : at::Tensor()};
}

}  // namespace hpcrl::algo
