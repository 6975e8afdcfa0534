// Model-reward scores computed on the reward model's own ranks (remote_reward.h).
#include "hpcrl/algo/objectives/remote_reward.h"

#include <torch/utils.h>

#include "hpcrl/algo/objectives/reward_model.h"
#include "hpcrl/algo/training/sample_transfer.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
constexpr int kRequestTag = 7301, kReplyTag = 7303;  // and + 1 (send_bytes)
constexpr int64_t kEndOfIteration = -1;              // SampleMessage::iteration of the end marker

// The samples' ids as request rows (a sample's other fields are not needed to score it).
RolloutSamples request_rows(const std::vector<SampleIds>& samples) {
  RolloutSamples rows;
  for (const SampleIds& s : samples) {
    rows.prompt_ids.push_back(*s.prompt);
    rows.response_ids.push_back(s.response ? *s.response : std::vector<int32_t>{});
    rows.logprobs.emplace_back();
    rows.example.push_back(0);
    rows.scores.push_back(0);
    rows.truncated.push_back(false);
  }
  return rows;
}
}  // namespace

RemoteRewardModel::RemoteRewardModel(Role& reward_model, const Role& generator, int world_size, int64_t micro_batch,
                                     std::string stage_name)
    : reward_model_(reward_model), generator_(generator),
      comm_(dist::new_group(all_ranks(world_size), stage_name + "/reward:" + reward_model.name)),
      micro_batch_(micro_batch), stage_(std::move(stage_name)) {}

int RemoteRewardModel::served_replica() const {
  return generator_.mesh.coord(comm_->rank()).dp % reward_model_.mesh.dp();
}

std::vector<double> RemoteRewardModel::score(const std::vector<SampleIds>& samples) {
  const int replica = served_replica();
  send_rows(*comm_, request_rows(samples), generator_.mesh, reward_model_.mesh, replica, kRequestTag);
  const auto reply = decode_values(recv_bytes(*comm_, reward_model_.mesh.world_rank(0, 0, replica, 0), kReplyTag));
  HPCRL_CHECK(reply.size() == 1 && reply[0].size() == samples.size(),
              "reward model '" << reward_model_.name << "' answered " << (reply.empty() ? 0 : reply[0].size())
                               << " scores for " << samples.size() << " samples");
  return std::vector<double>(reply[0].begin(), reply[0].end());  // fp32 values: exact both ways
}

void RemoteRewardModel::end_iteration() {
  if (!leads_replica(generator_.mesh, comm_->rank())) return;
  SampleMessage end;
  end.iteration = kEndOfIteration;
  send_to_group(*comm_, encode_samples(end), reward_model_.mesh, served_replica(), kRequestTag);
}

void RemoteRewardModel::serve_iteration() {
  const dist::Mesh &gm = generator_.mesh, &rm = reward_model_.mesh;
  const int me = comm_->rank(), replica = rm.coord(me).dp;
  std::vector<int> active;  // generating replicas still scoring this iteration
  for (int j = replica; j < gm.dp(); j += rm.dp()) active.push_back(j);
  while (!active.empty()) {
    for (auto it = active.begin(); it != active.end();) {
      SampleMessage request;
      {
        trace::ScopedSpan wait(stage_ + "/wait_samples");
        request = decode_samples(recv_bytes(*comm_, gm.world_rank(0, 0, *it, 0), kRequestTag));
      }
      if (request.iteration == kEndOfIteration) {
        it = active.erase(it);
        continue;
      }
      const RolloutSamples& rows = request.round.kept;
      std::vector<SampleIds> ids;
      for (size_t k = 0; k < rows.size(); ++k) ids.push_back({&rows.prompt_ids[k], &rows.response_ids[k]});
      std::vector<double> scores;
      {
        trace::ScopedSpan span(stage_ + "/reward");
        scores = last_token_values(reward_model_, ids, micro_batch_);
      }
      if (leads_replica(rm, me))
        send_to_group(*comm_, encode_values({std::vector<float>(scores.begin(), scores.end())}), gm, *it, kReplyTag);
      ++it;
    }
  }
}

}  // namespace hpcrl::algo
