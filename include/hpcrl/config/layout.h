// Layout arithmetic of one model role (docs/communication.md, Meshes) that needs no communicator:
// does a {tp, sp, ep, pp} layout fit the role's ranks and its model, how many
// ranks a pipeline needs, which ranks each role gets. `validate` reports these
// problems with file positions; `dist` builds its meshes on the same rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hpcrl/config/model_dims.h"
#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::config {

struct LayoutProblem {
  std::string key;      // the degree at fault: "tp", "sp", "ep", "pp" or "pp_layers"
  std::string message;  // lists every factor, e.g. "heads 14 % (tp·sp = 4·1 = 4) = 2"
  std::string fix;
};

// `ranks` = 0: unknown (only model-dependent checks run). `dims` null or with
// zero fields: unknown (those checks are skipped).
std::vector<LayoutProblem> check_layout(const ParallelConfig& p, int64_t ranks, const ModelDims* dims);

// dp = ranks / (tp·sp·pp) (0 when it does not divide).
int64_t data_parallel_degree(const ParallelConfig& p, int64_t ranks);

// The smallest rank count the layout fits: tp·pp·lcm(sp, ep) (ep must divide sp·dp).
int64_t rank_granularity(const ParallelConfig& p);

// Rank count the pipeline needs. Colocated: any multiple of `multiple_of`
// (every role and rollout layout runs on all ranks). Disaggregated: exactly `exact`.
struct RankNeeds {
  bool exact = false;
  int64_t count = 1;
};
RankNeeds ranks_needed(const PipelineConfig& config);

// The ranks `target` ("policy" or "policy.rollout") runs on, given the world size.
struct RankSpan {
  int64_t first = 0, count = 0;
};
RankSpan ranks_of(const PipelineConfig& config, const std::string& target, int64_t world);

}  // namespace hpcrl::config
