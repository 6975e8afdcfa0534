// ZeRO-3 around a model's forward and backward: the model's ParameterUnits
// (model/parameter_units.h) over the parameter shards of a ZeRO-3 optimizer.
//
//   forward of layer i     gather i (the prefetch started by the unit before
//                          it, if any), prefetch the next layer this rank
//                          holds (i+1, or the next of a pp stage's chunk
//                          layers), run, release i; when the
//                          output needs gradients, a hook on it re-gathers i
//                          (and prefetches i-1) just before the backward
//                          reaches the layer (the last layer is kept instead:
//                          its backward comes first)
//   backward of layer i    once every parameter of i has handed its gradient
//                          to the reducer (GradReduceScatter), release i
//   outer unit             gathered at the first forward; kept through the
//                          backward (the LM head reads it last in the forward
//                          and first in the backward), released with its
//                          gradients or after the optimizer step
// LoRA's frozen base is sharded alike, in the same units: gathered with its
// layer, released in the forward with it, and in the backward once the layer
// below is reached (the frozen weights serve the input's gradient, which may be
// computed after the adapters' gradients are handed over) or after the step.
// So a rank holds its shards, the outer unit and at most two layers at once,
// plus what a WholeParameters scope (generation, weight sync, checkpoint)
// asks for. Every rank of a shard group runs the same forwards and backwards,
// so they issue the gathers in one order.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "hpcrl/model/decoder_model.h"
#include "hpcrl/model/parameter_units.h"
#include "hpcrl/optim/sharded_adamw.h"

namespace hpcrl::algo {

class Zero3Units : public model::ParameterUnits, public std::enable_shared_from_this<Zero3Units> {
 public:
  // Installs itself on `model`, whose trained parameters `optimizer` (stage 3)
  // has sharded. Both must outlive it. The model's frozen parameters (LoRA's
  // base) are sharded here over `frozen_group` (the dense shard group), in the
  // same units; frozen experts under ep > 1 stay whole.
  static std::shared_ptr<Zero3Units> install(model::DecoderModel& model, optim::ShardedAdamW& optimizer,
                                             const dist::CommPtr& frozen_group);
  // Frees the optimizer's moments and masters (drop_state), gathers every unit
  // for good and removes itself from the model: its parameters are whole
  // tensors again (the end of a training stage). Collective.
  void uninstall();

  void before_forward(int64_t unit) override;
  void after_forward(int64_t unit, const at::Tensor& output) override;
  void write_back(int64_t unit) override;
  void hold_all(bool writes) override;
  void release_all() override;

  // After the optimizer step (which releases the trained units): the frozen
  // units still gathered, e.g. the lowest layer's, whose backward has no hook after it.
  void release_frozen();

  // Most bytes of gathered parameters held at once, over the groups.
  int64_t peak_gathered_bytes() const;

 private:
  struct Place {
    optim::ShardedParameters* params;
    size_t bucket;
  };
  Zero3Units(model::DecoderModel& model, optim::ShardedAdamW& optimizer);
  // f(params, bucket) for `unit`'s bucket in every group that has one (none:
  // a unit this rank holds no parameters of).
  template <typename F>
  void for_each_place(int64_t unit, F&& f) const;
  bool gather(int64_t unit);  // every group's bucket of `unit` gathered; true if one was not before
  void prefetch(int64_t unit);
  void release(int64_t unit);
  void before_backward(int64_t unit);
  void shard_frozen(const dist::CommPtr& group);
  void release_frozen(int64_t unit);
  // The layer this rank holds after / before `unit` (kOuter is before every
  // layer), or kNone: the layers a forward or backward reaches next.
  static constexpr int64_t kNone = -2;
  int64_t next_layer(int64_t unit) const;
  int64_t previous_layer(int64_t unit) const;

  model::DecoderModel& model_;
  optim::ShardedAdamW& optimizer_;
  std::unique_ptr<optim::ShardedParameters> frozen_;  // LoRA's frozen base, or null
  std::map<int64_t, std::vector<Place>> places_;  // unit -> its bucket in every group that has one
  int holds_ = 0;                                 // open WholeParameters scopes
  bool writes_ = false;                           // one of them writes
};

}  // namespace hpcrl::algo
