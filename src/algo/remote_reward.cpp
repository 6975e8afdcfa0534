// Model-reward scores computed on the reward model's own ranks (remote_reward.h).
#include "hpcrl/algo/remote_reward.h"

#include <torch/torch.h>

#include <cstring>

#include "hpcrl/algo/reward_model.h"
#include "hpcrl/algo/sample_transfer.h"
#include "hpcrl/dist/bootstrap.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
constexpr int kRequestTag = 7301, kReplyTag = 7303;  // and + 1 (send_bytes)
constexpr int32_t kEndMarker = -1;                     // in place of the row count

std::vector<uint8_t> as_bytes(const std::vector<int32_t>& words) {
  std::vector<uint8_t> out(words.size() * sizeof(int32_t));
  if (!out.empty()) std::memcpy(out.data(), words.data(), out.size());
  return out;
}
}  // namespace

std::vector<uint8_t> encode_score_request(const std::vector<SampleIds>& samples) {
  // [rows, then per row: prompt length, prompt ids, response length, response ids]
  std::vector<int32_t> w{static_cast<int32_t>(samples.size())};
  for (const SampleIds& s : samples) {
    w.push_back(static_cast<int32_t>(s.prompt->size()));
    w.insert(w.end(), s.prompt->begin(), s.prompt->end());
    const size_t r = s.response ? s.response->size() : 0;
    w.push_back(static_cast<int32_t>(r));
    if (r) w.insert(w.end(), s.response->begin(), s.response->end());
  }
  return as_bytes(w);
}

std::vector<uint8_t> encode_end_of_iteration() { return as_bytes({kEndMarker}); }

bool decode_score_request(const std::vector<uint8_t>& bytes, std::vector<std::vector<int32_t>>& prompts,
                          std::vector<std::vector<int32_t>>& responses) {
  HPCRL_CHECK(bytes.size() % sizeof(int32_t) == 0 && !bytes.empty(),
              "scoring request of " << bytes.size() << " bytes is not a whole message");
  std::vector<int32_t> w(bytes.size() / sizeof(int32_t));
  std::memcpy(w.data(), bytes.data(), bytes.size());
  if (w[0] == kEndMarker) return false;
  size_t at = 1;
  auto list = [&]() {
    HPCRL_CHECK(at < w.size() && w[at] >= 0 && at + 1 + size_t(w[at]) <= w.size(),
                "scoring request cut short at word " << at << " of " << w.size());
    std::vector<int32_t> ids(w.begin() + long(at) + 1, w.begin() + long(at) + 1 + w[at]);
    at += 1 + size_t(w[at]);
    return ids;
  };
  prompts.clear();
  responses.clear();
  for (int32_t k = 0; k < w[0]; ++k) {
    prompts.push_back(list());
    responses.push_back(list());
  }
  HPCRL_CHECK(at == w.size(), "scoring request has " << w.size() - at << " words past its last row");
  return true;
}

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
  if (leads_replica(generator_.mesh, comm_->rank()))
    send_to_group(*comm_, encode_score_request(samples), reward_model_.mesh, replica, kRequestTag);
  const std::vector<uint8_t> reply =
      recv_bytes(*comm_, reward_model_.mesh.world_rank(0, 0, replica, 0), kReplyTag);
  HPCRL_CHECK(reply.size() == samples.size() * sizeof(double),
              "reward model '" << reward_model_.name << "' answered " << reply.size() / sizeof(double)
                               << " scores for " << samples.size() << " samples");
  std::vector<double> scores(samples.size());
  if (!scores.empty()) std::memcpy(scores.data(), reply.data(), reply.size());
  return scores;
}

void RemoteRewardModel::end_iteration() {
  if (leads_replica(generator_.mesh, comm_->rank()))
    send_to_group(*comm_, encode_end_of_iteration(), reward_model_.mesh, served_replica(), kRequestTag);
}

void RemoteRewardModel::serve_iteration() {
  const dist::Mesh &gm = generator_.mesh, &rm = reward_model_.mesh;
  const int me = comm_->rank(), replica = rm.coord(me).dp;
  std::vector<int> active;  // generating replicas still scoring this iteration
  for (int j = replica; j < gm.dp(); j += rm.dp()) active.push_back(j);
  std::vector<std::vector<int32_t>> prompts, responses;
  while (!active.empty()) {
    for (auto it = active.begin(); it != active.end();) {
      std::vector<uint8_t> request;
      {
        trace::ScopedSpan wait(stage_ + "/wait_samples");
        request = recv_bytes(*comm_, gm.world_rank(0, 0, *it, 0), kRequestTag);
      }
      if (!decode_score_request(request, prompts, responses)) {
        it = active.erase(it);
        continue;
      }
      std::vector<SampleIds> ids;
      for (size_t k = 0; k < prompts.size(); ++k) ids.push_back({&prompts[k], &responses[k]});
      std::vector<double> scores;
      {
        trace::ScopedSpan span(stage_ + "/reward");
        scores = last_token_values(reward_model_, ids, micro_batch_);
      }
      std::vector<uint8_t> reply(scores.size() * sizeof(double));
      if (!reply.empty()) std::memcpy(reply.data(), scores.data(), reply.size());
      if (leads_replica(rm, me)) send_to_group(*comm_, reply, gm, *it, kReplyTag);
      ++it;
    }
  }
}

}  // namespace hpcrl::algo
