// Reference log-probs computed on the reference's own ranks (remote_reference.h).
#include "hpcrl/algo/remote/remote_reference.h"

#include <numeric>

#include "hpcrl/algo/training/rollout_batch.h"
#include "hpcrl/algo/training/sample_transfer.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

namespace {
constexpr int kRequestTag = 7201, kReplyTag = 7203;  // and + 1 (send_bytes)
}  // namespace

RemoteReference::RemoteReference(Role& reference, const Role& trainer, int world_size, const config::TrainHparams& train,
                                 double temperature, const std::string& stage)
    : reference_(reference), trainer_(trainer), comm_(dist::new_group(all_ranks(world_size), stage + "/reference")),
      micro_(micro_batch_options(train, reference.mesh.sp())), temperature_(temperature), stage_(stage) {}

at::Tensor RemoteReference::logprobs(const RolloutSamples& kept, const TokenBatch& batch) {
  const dist::Mesh &tm = trainer_.mesh, &rm = reference_.mesh;
  const int replica = tm.coord(comm_->rank()).dp % rm.dp();
  send_rows(*comm_, kept, tm, rm, replica, kRequestTag);
  const int leader = rm.world_rank(0, 0, replica, 0);
  return scatter_response_values(batch, decode_values(recv_bytes(*comm_, leader, kReplyTag)));
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
      const TokenBatch b =
          make_token_batch(kept.prompt_ids, kept.response_ids, pad, rm.sp(), reference_.device(), &kept.sampled);
      values = response_values(b, forward_logprobs(reference_, b, micro_, temperature_));
    }
    if (leads_replica(rm, me)) send_to_group(*comm_, encode_values(values), tm, j, kReplyTag);
  }
}

}  // namespace hpcrl::algo
