// A `type: model` reward on ranks of its own beside a disaggregated stage's
// generation (placement.ranges.<reward model> disjoint from every other
// role's). Responses are scored where they are generated, round by round —
// dynamic sampling draws a number of rounds per iteration known only when the
// rounds' scores are in — so the reward ranks follow the generator: each
// scoring round, every generating replica's leader sends its samples' ids to
// reward replica j mod dp_rm (to every rank of it: the forward is collective
// over the reward role's tp and sp groups) as a SampleMessage (send_rows), whose
// leader sends the scores back (encode_values)
// to every rank of the generating replica; after the iteration's last round
// each leader sends an end marker. Generating replicas decide their rounds
// together (the kept-group count is summed over them), so a reward replica
// serving several of them answers their rounds in turn without deadlock.
#pragma once

#include <string>
#include <vector>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/distributed/communicator.h"

namespace hpcrl::algo {

struct SampleIds;

class RemoteRewardModel {
 public:
  // Collective over the world (creates the reward's communicator); spans are named "<stage_name>/...".
  RemoteRewardModel(Role& reward_model, const Role& generator, int world_size, int64_t micro_batch,
                    std::string stage_name);

  // On generating ranks (every rank of a replica passes the same samples): one score per sample.
  std::vector<double> score(const std::vector<SampleIds>& samples);
  // On generating ranks, after an iteration's last scoring round.
  void end_iteration();
  // On the reward model's ranks: answers every scoring round of one iteration, for each replica it serves.
  void serve_iteration();

 private:
  int served_replica() const;  // the reward replica that serves this generating rank's replica

  Role& reward_model_;
  const Role& generator_;
  dist::CommPtr comm_;  // every rank; group rank = world rank
  int64_t micro_batch_;
  std::string stage_;
};

}  // namespace hpcrl::algo
