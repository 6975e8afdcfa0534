// ZeRO-1 (Rajbhandari et al., 2020, stage 1): AdamW whose state — both moments
// and, for bf16/f16 parameters, the fp32 master weights — is sharded over the
// data-parallel group instead of replicated on every rank.
//
// The parameters of a shard group are laid end to end in one flat vector of N
// elements (registration order), padded to W·S with S = ceil(N / W) for a group
// of W ranks; rank r owns elements [r·S, (r+1)·S). A step is
//   reduce_gradients(): flatten the local gradients, reduce-scatter (average)
//                       them so each rank receives only its S reduced elements
//                       (half the traffic of an all-reduce);
//   clip_grad_norm():   the global norm from the shards (every element counted
//                       exactly once: shard sums are added over the group, then
//                       tp/ep/pp as in grad_clip.h), shards scaled;
//   step(lr):           the AdamW update on the S owned elements only, then an
//                       all-gather of the updated parameters into every rank's
//                       full copy.
// The update is elementwise, so the result equals plain AdamW after a dp
// all-reduce. Gradients stay full-size (sharding them too is ZeRO-2).
//
// A model with experts has two shard groups: dense parameters over the dp·sp
// group and expert parameters over their edp replicas (each group gets its own
// flat buffer). State is saved per rank and resumes only with the same group
// sizes: load_state names what must match.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "hpcrl/dist/communicator.h"
#include "hpcrl/optim/adamw.h"
#include "hpcrl/optim/optimizer.h"
#include "hpcrl/optim/param_set.h"
#include "hpcrl/parallel/parallel_context.h"

namespace hpcrl::optim {

struct ShardGroup {
  std::string name;         // state-key prefix, e.g. "zero1.dense"
  ParamSet params;          // one dtype and device, contiguous tensors
  dist::CommPtr group;      // ranks holding identical copies of `params` (null: just this rank)
  double grad_divisor = 1;  // applied after the average (experts: ep, see train_step.cpp)
};

class Zero1AdamW : public Optimizer {
 public:
  Zero1AdamW(std::vector<ShardGroup> groups, AdamWOptions options);

  // After the backward of the last micro-batch: this rank's shard of the
  // gradients averaged over each group (and divided by its grad_divisor).
  void reduce_gradients();
  // Global gradient norm of the reduced gradients (before clipping), and the
  // shards scaled by clip_coefficient(norm, max_norm) (max_norm ≤ 0: none).
  double clip_grad_norm(double max_norm, const parallel::ParallelContext& ctx);
  // AdamW on the owned shard with learning rate `lr`, then all-gather of the
  // parameters. Requires reduce_gradients() since the last step.
  void step(double lr);
  void zero_grad();

  int64_t steps() const override { return step_; }
  // Keys per group "<name>.exp_avg", ".exp_avg_sq", ".master" (bf16/f16 only),
  // ".layout" ([group size, group rank, N, S]) and "step".
  std::map<std::string, at::Tensor> state() const override;
  void load_state(const std::map<std::string, at::Tensor>& state) override;
  int64_t state_bytes() const override;

  // Elements of one group: real (N), per-rank shard (S), and padded (W·S).
  struct Extent {
    int64_t numel, shard, padded;
  };
  Extent extent(size_t group) const;

 private:
  struct Segment {  // the part of one parameter inside this rank's shard
    size_t param;
    int64_t param_offset, shard_offset, length;
  };
  struct Group {
    ShardGroup spec;
    int size = 1, rank = 0;
    std::vector<int64_t> offsets;  // flat offset of each parameter
    int64_t numel = 0, shard = 0;
    std::vector<Segment> segments;
    at::ScalarType dtype = at::kFloat;
    at::Tensor exp_avg, exp_avg_sq, master;  // [S] fp32; master only for bf16/f16 params
    at::Tensor flat;                         // [W·S] param dtype: gradients in, parameters out (per step)
    at::Tensor grad;                         // [S] this rank's reduced gradient (per step)
  };
  static void setup(Group& g);
  at::Tensor weight_shard(const Group& g) const;  // [S] the owned parameters as the update's dtype

  std::vector<Group> groups_;
  AdamWOptions options_;
  int64_t step_ = 0;
};

}  // namespace hpcrl::optim
