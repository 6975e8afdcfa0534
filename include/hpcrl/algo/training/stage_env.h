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

// Where a stage finds its roles and datasets by name: the run's (the runner
// builds them from the pipeline file), or a test's.
class StageInputs {
 public:
  virtual ~StageInputs() = default;
  virtual Role& role(const std::string& name) = 0;
  // The generation copy of `role` ("<role>.rollout": on ranks of its own or in
  // another layout); null when `role` generates with its own model.
  virtual Role* rollout_role(const std::string& name) = 0;
  virtual const DataSplits& data(const std::string& name) = 0;
};

struct StageEnv {
  const config::PipelineConfig* pipeline = nullptr;
  const config::StageConfig* stage = nullptr;
  int stage_index = 0;
  dist::CommPtr world;
  trace::MetricsWriter* metrics = nullptr;        // rank 0 writes; may be null in tests
  StageInputs* inputs = nullptr;                  // the stage's roles and datasets
  Role& role(const std::string& name) const { return inputs->role(name); }
  Role* rollout_role(const std::string& name) const { return inputs ? inputs->rollout_role(name) : nullptr; }
  const DataSplits& data(const std::string& name) const { return inputs->data(name); }
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

struct StageResult {
  bool stopped = false;      // preempted: a checkpoint was written, exit resumable
  int64_t steps_done = 0;
  double eval_accuracy = -1;  // held-out accuracy at the end (-1: not measured)
  double eval_loss = -1;
};

}  // namespace hpcrl::algo
