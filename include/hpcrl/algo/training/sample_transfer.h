// Finished samples on their way from the generating ranks to the trainer's,
// when generation has ranks of its own (docs/placement.md). Each generating
// replica's leader (tp = sp = 0) sends every trainer rank its share of the
// replica's kept samples as one message per iteration; groups stay whole (GRPO's
// advantages are group-relative) and are dealt over the trainer's dp ranks in
// global order, replica 0's groups first: the order the colocated stage deals prompts in.
#pragma once

#include <cstdint>
#include <vector>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/algo/training/rollout_samples.h"
#include "hpcrl/algo/training/token_batch.h"
#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/distributed/communicator.h"
#include "hpcrl/io/dataset_cursor.h"

namespace hpcrl::algo {

struct SampleMessage {
  int64_t iteration = 0;
  int64_t version = 0;          // weight updates the generating model had when it sampled these
  io::DataCursor cursor;        // the generator's data position after drawing this iteration
  RolloutRound round;           // this trainer rank's share of the kept samples, and the iteration's totals
  double wait_weights_seconds = 0;  // the generator's wait in weight syncs since its previous message
  bool operator==(const SampleMessage& o) const;
};

std::vector<uint8_t> encode_samples(const SampleMessage& msg);
// InternalError when `bytes` is not a whole message (a protocol bug, not input).
SampleMessage decode_samples(const std::vector<uint8_t>& bytes);

// Per-row value lists (log-probs of each response's tokens) as bytes, and back.
std::vector<uint8_t> encode_values(const std::vector<std::vector<float>>& rows);
std::vector<std::vector<float>> decode_values(const std::vector<uint8_t>& bytes);

// `bytes` to group rank `peer` of `comm` as two messages (length at `tag`, then
// the bytes at tag + 1); `works` and `keep` hold the sends and their buffers
// until the caller waits.
void send_bytes(dist::Communicator& comm, const std::vector<uint8_t>& bytes, int peer, int tag,
                std::vector<dist::WorkPtr>& works, std::vector<at::Tensor>& keep);
std::vector<uint8_t> recv_bytes(dist::Communicator& comm, int peer, int tag);

// Every world rank 0..world-1 (the member list of the stage's point-to-point communicators).
std::vector<int> all_ranks(int world);
// World ranks of data-parallel group j of `mesh` (every tp/sp/pp rank of replica j).
std::vector<int> dp_group(const dist::Mesh& mesh, int j);
// Whether `rank` leads its replica of `mesh` (tp = sp = pp = 0): the one that sends for it.
bool leads_replica(const dist::Mesh& mesh, int rank);
// `bytes` to every rank of `to`'s replica j (send_bytes), waiting for the sends.
void send_to_group(dist::Communicator& comm, const std::vector<uint8_t>& bytes, const dist::Mesh& to, int j, int tag);

// A request to a role on other ranks: when this rank leads its replica of
// `from`, `rows` go to every rank of `to`'s replica j (as a SampleMessage).
void send_rows(dist::Communicator& comm, const RolloutSamples& rows, const dist::Mesh& from, const dist::Mesh& to,
               int j, int tag);

// Each row's prompt and response ids back out of a batch (unpacked rows), to send to a role on other ranks.
RolloutSamples batch_rows(const TokenBatch& b);

// Groups [first, first + count) of replica `replica`'s kept groups that trainer
// dp rank `dp_rank` of `dp` receives: the global group list (replicas in order,
// `groups_per_replica` each) cut into dp contiguous parts of ⌊N·j/dp⌋..⌊N·(j+1)/dp⌋.
struct GroupSlice {
  int64_t first = 0, count = 0;
};
GroupSlice trainer_share(const std::vector<int64_t>& groups_per_replica, int replica, int dp, int dp_rank);

// The messages between the generation role and the trainer role of one stage,
// over `world` (a communicator of every rank, group rank = world rank).
class SampleChannel {
 public:
  SampleChannel(const Role& generator, const Role& trainer, dist::CommPtr world, int64_t group);

  // On every generating rank (collective over the generator's dp group): the
  // leaders start one send per trainer rank; they complete in wait_sends().
  void send(const SampleMessage& msg);
  void wait_sends();
  // On every trainer rank: the messages of every generating replica for
  // `iteration`, merged in replica order (totals and cursor from replica 0).
  SampleMessage receive(int64_t iteration);
  // Generator and trainer on the same ranks in different layouts (collective
  // over the channel's ranks): this rank's trainer share of every replica's
  // kept samples, in the order receive() merges them.
  RolloutSamples redeal(const RolloutSamples& kept);
  // At a checkpoint (in_flight.h): every generating rank sends its state to
  // the trainer's first rank, which receives them all, in rank order (an
  // empty list on every other rank).
  void send_generator_state(const std::vector<uint8_t>& bytes);
  std::vector<std::vector<uint8_t>> receive_generator_states();

 private:
  const Role& generator_;
  const Role& trainer_;
  dist::CommPtr world_;
  int64_t group_;
  std::vector<dist::WorkPtr> pending_;
  std::vector<at::Tensor> in_flight_;  // buffers of pending sends
};

}  // namespace hpcrl::algo
