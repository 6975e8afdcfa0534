// AdamW whose state is sharded over the data-parallel group (Rajbhandari et
// al., 2020): ZeRO-1 shards the optimizer state (both moments and, for
// bf16/f16 parameters, the fp32 master weights), ZeRO-2 the gradients too,
// ZeRO-3 the parameters as well (sharded_parameters.h).
//
// Each rank owns 1/W of every element (ShardLayout). A step is
//   gradients:        averaged over the group into this rank's shard only
//                     (GradReduceScatter): ZeRO-1 reduce-scatters the full,
//                     accumulated gradients once after the backward; ZeRO-2
//                     reduce-scatters each bucket during every micro-batch's
//                     backward and frees the full gradients, so no rank holds them;
//   clip_grad_norm(): the global norm from the shards (every element counted
//                     exactly once: shard sums are added over the group, then
//                     tp/ep/pp as in grad_clip.h), shards scaled;
//   step(lr):         the AdamW update on the owned elements only, then an
//                     all-gather of the updated parameters, bucket by bucket
//                     (ZeRO-3: the update is made in the parameter shard,
//                     which the next forward gathers unit by unit).
// ZeRO-3's buckets are the forward units of `units` (ShardLayout::by_units),
// so that a bucket's gradients are complete when its unit's backward is, and
// its all-gathered parameters are the unit's.
// The update is elementwise, so the result equals plain AdamW after a dp
// all-reduce (to rounding: ZeRO-2 averages each micro-batch before summing).
//
// A model with experts has two shard groups: dense parameters over the dp·sp
// group and expert parameters over their edp replicas. State is saved per rank
// and resumes only with the same stage, group sizes and buckets: load_state
// names what must match.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/optim/adamw.h"
#include "hpcrl/optim/grad_reduce_scatter.h"
#include "hpcrl/optim/optimizer.h"
#include "hpcrl/optim/param_set.h"
#include "hpcrl/optim/sharded_parameters.h"
#include "hpcrl/parallel/parallel_context.h"

namespace hpcrl::optim {

struct ShardGroup {
  std::string name;         // state-key prefix, e.g. "zero1.dense"
  ParamSet params;          // one dtype and device, contiguous tensors
  dist::CommPtr group;      // ranks holding identical copies of `params` (null: just this rank)
  double grad_divisor = 1;  // applied after the average (experts: ep, see train_step.cpp)
  std::vector<int64_t> units;  // ZeRO-3: the forward unit of each parameter (model/parameter_units.h)
  std::vector<bool> alone;     // stages 2 and 3: parameters with a bucket of their own (ShardLayout), or empty
  // Which model shard `params` are (tp, pp and, for experts, ep coordinates):
  // the saved groups whose shards a resume at another group size recuts
  // (reshard.h). Saved as "<name>.replica"; empty: not reshardable.
  std::vector<int64_t> replica;
};

class ShardedAdamW : public Optimizer {
 public:
  // stage 1, 2 or 3 (ZeRO-1, 2 or 3); bucket_bytes only for stage 2. Stage 3
  // takes over the parameters' storage (ShardedParameters) at construction.
  ShardedAdamW(std::vector<ShardGroup> groups, AdamWOptions options, int stage,
               int64_t bucket_bytes = kZero2BucketBytes);

  int stage() const { return stage_; }
  // ZeRO-2/3: before each micro-batch's backward, the buckets the last one left are sent.
  void begin_micro_batch(bool last) override;
  bool reduces_during_backward() const override { return stage_ >= 2; }
  // After the backward of the last micro-batch: this rank's shard of the
  // gradients averaged over each group (and divided by its grad_divisor);
  // the parameters' own gradients are released.
  void reduce_gradients() override;
  // This rank's part of the reduced gradient of `name`, which must have a
  // bucket of its own (ShardGroup::alone): the same elements on every rank set
  // whose layout has that parameter alone.
  at::Tensor reduced_gradient(const std::string& name) const override;
  // Each group's reduced shard (empty shards left out).
  std::vector<at::Tensor> reduced_gradients() const override;
  // Global gradient norm of the reduced gradients (before clipping), and the
  // shards scaled by clip_coefficient(norm, max_norm) (max_norm ≤ 0: none).
  double clip_grad_norm(double max_norm, const parallel::ParallelContext& ctx) override;
  // AdamW on the owned shard with learning rate `lr`, then all-gather of the
  // parameters. Requires reduce_gradients() since the last step.
  void step(double lr) override;
  // Releases the parameters' gradients and the reduced shards.
  void zero_grad() override;
  // Frees the moments and masters for good (the optimizer is going; ZeRO-3
  // then gathers the whole parameters, which should not sit beside them).
  void drop_state();
  // "the gradient of NAME (this rank's shard)" for the first parameter whose
  // reduced elements on this rank are not finite, or "" (after reduce_gradients()).
  std::string first_nonfinite_gradient() const override;
  // Most gradient bytes the groups' reducers held at once (GradReduceScatter::peak_bytes, summed).
  int64_t peak_gradient_bytes() const;

  int64_t steps() const override { return step_; }
  // Keys per group "<name>.exp_avg", ".exp_avg_sq", ".master" (bf16/f16 only),
  // ".layout" ([group size, group rank, N, S]), ".buckets" (stages 2 and 3:
  // every bucket's element count), ".replica" and "step".
  std::map<std::string, at::Tensor> state() const override;
  void load_state(const std::map<std::string, at::Tensor>& state) override;
  void load_resharded(const std::vector<SavedState>& saved) override;
  int64_t state_bytes() const override;

  const ShardLayout& layout(size_t group) const { return groups_.at(group).reducer->layout(); }
  size_t num_groups() const { return groups_.size(); }
  GradReduceScatter& reducer(size_t group) { return *groups_.at(group).reducer; }
  // ZeRO-3: group `group`'s parameter shards (null for stages 1 and 2 and for an empty group).
  ShardedParameters* sharded_parameters(size_t group) { return groups_.at(group).sharded.get(); }

  // The update and the parameters' all-gather of ZeRO-1/2 go in chunks of at
  // most this many owned elements (8 MiB of fp32; update_and_gather).
  static constexpr int64_t kStepChunk = int64_t(1) << 21;

 private:
  struct Group {
    ShardGroup spec;
    std::unique_ptr<GradReduceScatter> reducer;
    at::ScalarType dtype = at::kFloat;
    at::Tensor exp_avg, exp_avg_sq, master;  // [S] fp32; master only for bf16/f16 params
    at::Tensor grad;                         // [S] this rank's reduced gradient (per step)
    std::unique_ptr<ShardedParameters> sharded;  // ZeRO-3
  };
  void setup(Group& g, int64_t bucket_bytes);
  // ZeRO-1/2: the update and the all-gather of the parameters, chunk by chunk
  // of each bucket's owned elements. Holds one chunk's fp32 working copy and
  // its W gathered copies at a time: a whole-shard copy (fp32) and ZeRO-1's
  // one bucket gathered whole (the model's size) were the run's peak memory
  // once the step came after the backward. Elementwise, so the chunks' update
  // is the whole shard's, bit for bit.
  void update_and_gather(Group& g, double lr);
  void load_group(Group& g, const std::map<std::string, at::Tensor>& state);
  void reshard_group(Group& g, const std::vector<SavedState>& saved);

  std::vector<Group> groups_;
  AdamWOptions options_;
  int stage_;
  int64_t step_ = 0;
};

}  // namespace hpcrl::optim
