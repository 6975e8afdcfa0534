// Reference log-probs computed on the reference's own ranks (remote_reference.h).
#include "hpcrl/algo/remote_reference.h"

#include <numeric>

#include "hpcrl/algo/rollout_batch.h"
#include "hpcrl/algo/sample_transfer.h"
#include "hpcrl/dist/bootstrap.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

namespace {
constexpr int kRequestTag = 7201, kReplyTag = 7203;  // and + 1 (send_bytes)

std::vector<int> all_ranks(int world) {
  std::vector<int> r(size_t(world), 0);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

// World ranks of trainer dp group j (every tp/sp/pp rank of that replica).
std::vector<int> dp_group(const dist::Mesh& m, int j) {
  std::vector<int> out;
  for (int r = m.first_rank(); r <= m.last_rank(); ++r)
    if (m.coord(r).dp == j) out.push_back(r);
  return out;
}

bool is_leader(const dist::Mesh& m, int rank) {
  const dist::MeshCoord c = m.coord(rank);
  return c.tp == 0 && c.sp == 0 && c.pp == 0;
}
}  // namespace

RemoteReference::RemoteReference(Role& reference, const Role& trainer, int world_size, const config::TrainHparams& train,
                                 double temperature, const std::string& stage)
    : reference_(reference), trainer_(trainer), comm_(dist::new_group(all_ranks(world_size), stage + "/reference")),
      micro_(micro_batch_options(train, reference.mesh.sp())), temperature_(temperature), stage_(stage) {}

at::Tensor RemoteReference::logprobs(const RolloutSamples& kept, const TokenBatch& batch) {
  const dist::Mesh &tm = trainer_.mesh, &rm = reference_.mesh;
  const int me = comm_->rank(), j = tm.coord(me).dp, replica = j % rm.dp();
  std::vector<dist::WorkPtr> works;
  std::vector<at::Tensor> keep;
  if (is_leader(tm, me)) {
    SampleMessage request;
    request.round.kept = kept;
    const std::vector<uint8_t> bytes = encode_samples(request);
    for (int r : dp_group(rm, replica)) send_bytes(*comm_, bytes, r, kRequestTag, works, keep);
  }
  const int leader = rm.world_rank(0, 0, replica, 0);
  std::vector<std::vector<float>> values = decode_values(recv_bytes(*comm_, leader, kReplyTag));
  for (auto& w : works) w->wait();
  return scatter_response_values(batch, values);
}

void RemoteReference::serve() {
  const dist::Mesh &tm = trainer_.mesh, &rm = reference_.mesh;
  const int me = comm_->rank(), replica = rm.coord(me).dp;
  const int32_t pad = std::max(0, reference_.tokenizer->pad_id());
  for (int j = replica; j < tm.dp(); j += rm.dp()) {
    RolloutSamples kept;
    {
      trace::ScopedSpan wait(stage_ + "/wait_samples");
      kept = decode_samples(recv_bytes(*comm_, tm.world_rank(0, 0, j, 0), kRequestTag)).round.kept;
    }
    std::vector<std::vector<float>> values(kept.size());
    if (kept.size() > 0) {
      trace::ScopedSpan span(stage_ + "/ref_logprob");
      const TokenBatch b = make_token_batch(kept.prompt_ids, kept.response_ids, pad, rm.sp(), reference_.device());
      values = response_values(b, forward_logprobs(reference_, b, micro_, temperature_));
    }
    if (!is_leader(rm, me)) continue;
    std::vector<dist::WorkPtr> works;
    std::vector<at::Tensor> keep;
    const std::vector<uint8_t> bytes = encode_values(values);
    for (int r : dp_group(tm, j)) send_bytes(*comm_, bytes, r, kReplyTag, works, keep);
    for (auto& w : works) w->wait();
  }
}

}  // namespace hpcrl::algo
