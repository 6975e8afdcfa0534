// The PPO critic served from its own ranks (remote_critic.h).
#include "hpcrl/algo/remote/remote_critic.h"

#include <torch/utils.h>

#include <numeric>

#include "hpcrl/algo/training/micro_batches.h"
#include "hpcrl/algo/training/rollout_batch.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/training/sample_transfer.h"
#include "hpcrl/algo/training/value_pass.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

namespace {
constexpr int kIdsTag = 7301, kValuesTag = 7303, kReturnsTag = 7305, kMetricsTag = 7307;  // and + 1 (send_bytes)
}  // namespace

RemoteCritic::RemoteCritic(Role& critic, const Role& trainer, int world_size, const config::PpoStage& cfg,
                           const std::string& stage)
    : critic_(critic), trainer_(trainer), comm_(dist::new_group(all_ranks(world_size), stage + "/critic")), cfg_(cfg),
      stage_(stage) {}

at::Tensor RemoteCritic::values(const TokenBatch& batch) {
  const int me = comm_->rank(), j = trainer_.mesh.coord(me).dp;
  send_rows(*comm_, batch_rows(batch), trainer_.mesh, critic_.mesh, j, kIdsTag);
  const int leader = critic_.mesh.world_rank(0, 0, j, 0);
  return scatter_response_values(batch, decode_values(recv_bytes(*comm_, leader, kValuesTag)));
}

std::vector<std::pair<std::string, double>> RemoteCritic::update(const TokenBatch& batch, const at::Tensor& returns) {
  const int me = comm_->rank(), j = trainer_.mesh.coord(me).dp;
  if (leads_replica(trainer_.mesh, me))
    send_to_group(*comm_, encode_values(response_values(batch, returns)), critic_.mesh, j, kReturnsTag);
  const std::vector<float> m = decode_values(recv_bytes(*comm_, critic_.mesh.world_rank(0, 0, j, 0), kMetricsTag))[0];
  return {{"critic/loss", double(m.at(0))}, {"critic/clip_frac", double(m.at(1))}};
}

void RemoteCritic::serve(Trainer& trainer, int64_t iteration, int64_t n_mini) {
  const int me = comm_->rank(), j = critic_.mesh.coord(me).dp;
  const int from = trainer_.mesh.world_rank(0, 0, j, 0);
  const int32_t pad = std::max(0, critic_.tokenizer->pad_id());
  RolloutSamples rows;
  {
    trace::ScopedSpan wait(stage_ + "/wait_samples");
    rows = decode_samples(recv_bytes(*comm_, from, kIdsTag)).round.kept;
  }
  const TokenBatch b =
      make_token_batch(rows.prompt_ids, rows.response_ids, pad, critic_.mesh.sp(), critic_.device(), &rows.sampled);
  at::Tensor old_values;
  {
    trace::ScopedSpan span(stage_ + "/values");
    old_values = forward_values(critic_, b, micro_batch_options(cfg_.train, critic_.ctx.sp_size())) * b.loss_mask;
  }
  if (leads_replica(critic_.mesh, me))
    send_to_group(*comm_, encode_values(response_values(b, old_values)), trainer_.mesh, j, kValuesTag);
  std::vector<std::vector<float>> returns;
  {
    trace::ScopedSpan wait(stage_ + "/wait_samples");
    returns = decode_values(recv_bytes(*comm_, from, kReturnsTag));
  }
  const at::Tensor target_returns = scatter_response_values(b, returns);
  const ValueTargets target{b.loss_mask, old_values, target_returns, cfg_.value_clip};
  const CriticSums sums = critic_update({cfg_, critic_, trainer, n_mini, me}, b, target, iteration);
  const double tokens = std::max(1.0, sum_over_dp(critic_, b.loss_mask.sum().item<double>()));
  const auto metrics = critic_loss_metrics(cfg_, critic_, sums, tokens, n_mini);
  if (leads_replica(critic_.mesh, me))
    send_to_group(*comm_, encode_values({{float(metrics[0].second), float(metrics[1].second)}}), trainer_.mesh, j,
                  kMetricsTag);
}

}  // namespace hpcrl::algo
