// What a disaggregated RL stage has in flight at a weight sync
// (docs/placement.md "Stop, resume, failure"): each trainer rank's samples
// received but not yet trained on, and each generating rank's data position
// and, with partial rollouts, its groups in flight (paused samples with their
// tokens, log-probs, versions and kept caches; prompts drawn ahead). A checkpoint written at
// a sync keeps them beside the trainer's state, and a run resumed from it
// re-enters the round plan at that sync (rl_rounds.h resume_plan), so it
// repeats the uninterrupted run.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpcrl/algo/stages/rollout_stream.h"
#include "hpcrl/algo/training/sample_transfer.h"
#include "hpcrl/io/dataset_cursor.h"

namespace hpcrl::algo {

// A generating rank at a sync (the ranks of a replica hold the same data
// position and groups; a paused row's kept cache is each rank's own heads).
struct GeneratorSnapshot {
  io::DataCursor cursor;               // its data position after its last draw
  std::vector<GroupInFlight> groups;   // partial rollouts: the groups in flight, in draw order
};

std::vector<uint8_t> encode_generator(const GeneratorSnapshot& g);
std::vector<uint8_t> encode_inbox(const std::map<int64_t, SampleMessage>& inbox);
// InputError naming `where` (the file) when `bytes` is not what the encoder wrote.
GeneratorSnapshot decode_generator(const std::vector<uint8_t>& bytes, const std::string& where);
std::map<int64_t, SampleMessage> decode_inbox(const std::vector<uint8_t>& bytes, const std::string& where);

// Their files in a step directory.
std::string inbox_file(int world_rank);   // in-flight/trainer-rank-NNNNN.bin
std::string generator_file(int world_rank);  // in-flight/generator-rank-NNNNN.bin

// state.json's "in_flight": where a resumed run re-enters the round plan, and
// the layout the files were cut for (another one regenerates what was in flight).
struct InFlightPoint {
  int64_t plan_start = 0;       // the round plan's first iteration
  int64_t plan_staleness = 0;   // its k (plan_rounds)
  int64_t sync_iteration = 0;   // the sync before generating this iteration
  int world = 0;                // world size
  int64_t trainer_dp = 0, generator_dp = 0, generator_tp = 0;

  nlohmann::json to_json() const;
  // InputError naming `where` on a missing or non-integer field.
  static InFlightPoint from_json(const nlohmann::json& j, const std::string& where);
  // Whether a run of this layout can take the files (the plan is checked by resume_plan).
  bool same_layout(const InFlightPoint& now) const {
    return world == now.world && trainer_dp == now.trainer_dp && generator_dp == now.generator_dp &&
           generator_tp == now.generator_tp;
  }
};

}  // namespace hpcrl::algo
