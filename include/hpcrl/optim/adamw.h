// AdamW with decoupled weight decay (Loshchilov & Hutter), numerically the same
// update as torch.optim.AdamW, written out so its state can be saved by name,
// sharded over dp (ZeRO-1) and kept in fp32 when parameters are bf16.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "hpcrl/optim/optimizer.h"
#include "hpcrl/optim/param_set.h"

namespace hpcrl::optim {

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

class AdamW : public Optimizer {
 public:
  AdamW(ParamSet params, AdamWOptions options);

  // One update with learning rate `lr` (the schedule's value for this step).
  // Parameters without a gradient are skipped. bf16/f16 parameters keep an fp32
  // master copy; the update happens on the master and is copied back.
  void step(double lr);
  void zero_grad();

  int64_t steps() const override { return step_; }
  const ParamSet& params() const { return params_; }
  AdamWOptions& options() { return options_; }

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
  std::vector<int64_t> replica_;
  std::vector<Slot> slots_;
  int64_t step_ = 0;
};

}  // namespace hpcrl::optim
