// AdamW with decoupled weight decay (Loshchilov & Hutter), numerically the same
// update as torch.optim.AdamW, written out so its state can be saved by name,
// sharded over dp (ZeRO-1) and kept in fp32 when parameters are bf16.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hpcrl/distributed/communicator.h"
#include "hpcrl/optim/grad_sync.h"
#include "hpcrl/optim/optimizer.h"
#include "hpcrl/optim/param_set.h"

namespace hpcrl::optim {

// How an update runs over a parameter set (adamw_multi_tensor.h): one tensor at
// a time, LibTorch's _foreach ops over all of them, or its fused kernel.
enum class AdamWKernel { kPerTensor, kMultiTensor, kFused };

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
};

// One AdamW update of `w` (fp32 master or fp32 parameter) from gradient `g`
// (any float dtype) at step `step` (1-based), moments updated in place. Purely
// elementwise, so applying it to a slice gives the same bits as to the whole.
// Dense fp32 CPU tensors take one fused pass; others the tensor ops below.
void adamw_update(at::Tensor& w, const at::Tensor& g, at::Tensor& exp_avg, at::Tensor& exp_avg_sq, double lr,
                  int64_t step, const AdamWOptions& o);
// The same update as nine tensor ops (any device and dtype): what adamw_update runs
// off the CPU fast path, and the reference its fused pass is tested and benchmarked against.
void adamw_update_with_ops(at::Tensor& w, const at::Tensor& g, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                           double lr, int64_t step, const AdamWOptions& o);

// Where plain AdamW averages the gradients (GradSync: bucketed all-reduces that
// overlap the last micro-batch's backward): the dense parameters over `dense`
// (the dp·sp group), expert parameters over `experts` (their edp replicas), then
// divided by `expert_divisor` (ep: the token exchange already summed them over
// ep, and the dense denominator dp·sp is ep·edp). Null groups: no communication.
struct GradientGroups {
  dist::CommPtr dense, experts;
  double expert_divisor = 1;
  size_t bucket_bytes = 8u << 20;
};

// Full state for every parameter on every rank of its group.
class AdamW : public Optimizer {
 public:
  AdamW(ParamSet params, AdamWOptions options, GradientGroups groups = {});
  ~AdamW() override;

  void begin_micro_batch(bool last) override;
  bool reduces_during_backward() const override { return false; }
  void reduce_gradients() override;
  at::Tensor reduced_gradient(const std::string& name) const override;
  std::vector<at::Tensor> reduced_gradients() const override;
  double clip_grad_norm(double max_norm, const parallel::ParallelContext& ctx) override;
  // One update with learning rate `lr` (the schedule's value for this step).
  // Parameters without a gradient are skipped. bf16/f16 parameters keep an fp32
  // master copy; the update happens on the master and is copied back.
  void step(double lr) override;
  void zero_grad() override;
  std::string first_nonfinite_gradient() const override;

  int64_t steps() const override { return step_; }
  const ParamSet& params() const { return params_; }
  AdamWOptions& options() { return options_; }
  AdamWKernel kernel() const { return kernel_; }
  // Tests and benchmarks: the same update through another kernel.
  void set_kernel(AdamWKernel kernel) { kernel_ = kernel; }

  // Which model shard the parameters are (tp, pp, ep coordinates): every
  // data-parallel replica holds the same state, so a resume at another dp size
  // loads any saved rank with the same key. Saved as "replica".
  void set_replica(std::vector<int64_t> key) { replica_ = std::move(key); }

  // State as named tensors ("<param>.exp_avg", "<param>.exp_avg_sq",
  // "<param>.master", "step" and "replica") for checkpoints; load_state checks every name and shape.
  std::map<std::string, at::Tensor> state() const override;
  void load_state(const std::map<std::string, at::Tensor>& state) override;
  void load_resharded(const std::vector<SavedState>& saved) override;
  int64_t state_bytes() const override;

 private:
  struct Slot {
    at::Tensor exp_avg, exp_avg_sq, master;  // master is undefined for fp32 params
  };
  ParamSet params_;
  AdamWOptions options_;
  AdamWKernel kernel_;      // decided once, from where the weights live (adamw_multi_tensor.h)
  ParamSet expert_params_;  // the kExpert ones of params_
  double expert_divisor_;
  std::unique_ptr<GradSync> dense_sync_, expert_sync_;
  std::vector<int64_t> replica_;
  std::vector<Slot> slots_;
  int64_t step_ = 0;
};

}  // namespace hpcrl::optim
