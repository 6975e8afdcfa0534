// What the runner hands a stage loop: the stage's config, the roles and data
// it uses, where metrics and checkpoints go, whether to resume, and the
// collective "should we stop?" check behind preemption. Stage loops (SFT, GRPO,
// PPO, distillation) only use this, so they can be driven by tests too.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "hpcrl/algo/training/role.h"
#include "hpcrl/config/pipeline_config.h"
#include "hpcrl/distributed/communicator.h"
#include "hpcrl/io/dataset.h"
#include "hpcrl/trace/metrics.h"

namespace hpcrl::algo {

struct DataSplits {
  io::Dataset train;
  io::Dataset eval;
};

struct StageEnv {
  const config::PipelineConfig* pipeline = nullptr;
  const config::StageConfig* stage = nullptr;
  int stage_index = 0;
  dist::CommPtr world;
  trace::MetricsWriter* metrics = nullptr;        // rank 0 writes; may be null in tests
  std::function<Role&(const std::string&)> role;  // by role name
  // The generation copy of `role` ("<role>.rollout": on ranks of its own or in
  // another layout); null when `role` generates with its own model.
  std::function<Role*(const std::string&)> rollout_role;
  std::function<const DataSplits&(const std::string&)> data;  // by dataset name
  // Collective over the world: true when any rank was asked to stop (SIGTERM/SIGUSR1).
  std::function<bool()> should_stop;
  // This rank was asked to stop (not collective, cheap): polled inside long work,
  // which then agrees on it with the other ranks (algo/stages/stop_inside.h).
  std::function<bool()> stop_signalled;

  std::string checkpoint_dir;  // checkpoints/<NN>-<stage>/ of this stage
  int64_t checkpoint_every = 0;
  int64_t keep_last = 2;
  std::optional<std::string> resume_from;  // a step directory of this stage to continue from
  bool progress = true;                    // show a progress line (rank 0)
};

inline Role* rollout_role_of(const StageEnv& env, const std::string& role) {
  return env.rollout_role ? env.rollout_role(role) : nullptr;
}

struct StageResult {
  bool stopped = false;      // preempted: a checkpoint was written, exit resumable
  int64_t steps_done = 0;
  double eval_accuracy = -1;  // held-out accuracy at the end (-1: not measured)
  double eval_loss = -1;
};

}  // namespace hpcrl::algo
