// The distillation teacher served from its own ranks (remote_teacher.h).
#include "hpcrl/algo/remote/remote_teacher.h"

#include <torch/utils.h>

#include <numeric>

#include "hpcrl/algo/training/sample_transfer.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

namespace {
constexpr int kRowsTag = 7401, kLogprobTag = 7403, kIdsTag = 7405;  // and + 1 (send_bytes)

// Each row's response positions of a [B, T, k] tensor, flattened (R·k values per row).
std::vector<std::vector<float>> response_rows(const TokenBatch& b, const at::Tensor& t) {
  const at::Tensor v = t.to(at::kCPU, at::kFloat).contiguous();
  const int64_t k = v.size(2);
  std::vector<std::vector<float>> out(size_t(b.rows()));
  for (int64_t i = 0; i < b.rows(); ++i) {
    const int64_t P = b.prompt_lens[size_t(i)], R = b.response_lens[size_t(i)];
    const float* row = v[i].data_ptr<float>() + (P - 1) * k;
    out[size_t(i)].assign(row, row + R * k);
  }
  return out;
}

// The inverse for `batch`'s layout: [B, T, k] with the rows' response positions filled.
at::Tensor scatter_rows(const TokenBatch& b, const std::vector<std::vector<float>>& rows, int64_t k, at::ScalarType type) {
  at::Tensor out = at::zeros({b.rows(), b.ids.size(1), k}, at::kFloat);
  for (int64_t i = 0; i < b.rows(); ++i) {
    const int64_t P = b.prompt_lens[size_t(i)];
    const auto& r = rows[size_t(i)];
    if (!r.empty()) std::copy(r.begin(), r.end(), out[i].data_ptr<float>() + (P - 1) * k);
  }
  return out.to(type).to(b.loss_mask.device());
}
}  // namespace

RemoteTeacher::RemoteTeacher(Role& teacher, const Role& student, int world_size, int64_t k,
                             const config::TrainHparams& train, double temperature)
    : teacher_(teacher), student_(student), comm_(dist::new_group(all_ranks(world_size), "distill/teacher")),
      k_(std::min<int64_t>(k, teacher.config->arch->vocab_size)), micro_(micro_batch_options(train, teacher.mesh.sp())),
      temperature_(temperature) {}

TopK RemoteTeacher::topk(const TokenBatch& batch) {
  const int me = comm_->rank(), j = student_.mesh.coord(me).dp;
  send_rows(*comm_, batch_rows(batch), student_.mesh, teacher_.mesh, j, kRowsTag);
  const int from = teacher_.mesh.world_rank(0, 0, j, 0);
  TopK t;
  t.logprob = scatter_rows(batch, decode_values(recv_bytes(*comm_, from, kLogprobTag)), k_, at::kFloat);
  t.ids = scatter_rows(batch, decode_values(recv_bytes(*comm_, from, kIdsTag)), k_, at::kLong);  // exact below 2^24
  return t;
}

void RemoteTeacher::serve() {
  const int me = comm_->rank(), j = teacher_.mesh.coord(me).dp;
  RolloutSamples rows;
  {
    trace::ScopedSpan wait("distill/wait_samples");
    rows = decode_samples(recv_bytes(*comm_, student_.mesh.world_rank(0, 0, j, 0), kRowsTag)).round.kept;
  }
  const int32_t pad = std::max(0, teacher_.tokenizer->pad_id());
  const TokenBatch b = make_token_batch(rows.prompt_ids, rows.response_ids, pad, teacher_.mesh.sp(),
                                        teacher_.device(), &rows.sampled);
  TopK t;
  {
    trace::ScopedSpan span("distill/teacher_forward");
    t = teacher_topk(teacher_, b, k_, temperature_, micro_);
  }
  if (!leads_replica(teacher_.mesh, me)) return;
  send_to_group(*comm_, encode_values(response_rows(b, t.logprob)), student_.mesh, j, kLogprobTag);
  send_to_group(*comm_, encode_values(response_rows(b, t.ids.to(at::kFloat))), student_.mesh, j, kIdsTag);
}

}  // namespace hpcrl::algo
