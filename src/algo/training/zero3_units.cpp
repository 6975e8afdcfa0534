// ZeRO-3 gathers and releases around the model's units (zero3_units.h).
#include "hpcrl/algo/training/zero3_units.h"

#include "hpcrl/util/check.h"

namespace hpcrl::algo {

Zero3Units::Zero3Units(model::DecoderModel& model, optim::ShardedAdamW& optimizer)
    : model_(model), optimizer_(optimizer) {}

std::shared_ptr<Zero3Units> Zero3Units::install(model::DecoderModel& model, optim::ShardedAdamW& optimizer,
                                                const dist::CommPtr& frozen_group) {
  HPCRL_CHECK(optimizer.stage() == 3, "Zero3Units over a ZeRO-" << optimizer.stage() << " optimizer");
  std::shared_ptr<Zero3Units> units(new Zero3Units(model, optimizer));
  std::weak_ptr<Zero3Units> weak = units;
  units->shard_frozen(frozen_group);
  for (size_t g = 0; g < optimizer.num_groups(); ++g) {
    optim::ShardedParameters* params = optimizer.sharded_parameters(g);
    if (!params) continue;
    const auto& buckets = params->layout().buckets;
    for (size_t b = 0; b < buckets.size(); ++b) units->places_[buckets[b].unit].push_back({params, b});
    // The backward has read the bucket's parameters for the last time.
    optimizer.reducer(g).on_bucket_complete([weak, params](size_t b) {
      if (auto self = weak.lock(); self && self->holds_ == 0) params->release(b);
    });
  }
  model.set_parameter_units(units);
  return units;
}

void Zero3Units::shard_frozen(const dist::CommPtr& group) {
  const int ep = model_.parallel_context().ep_size();
  optim::ParamSet frozen;
  std::vector<int64_t> numels, units;
  for (const auto& item : model_.named_parameters()) {
    const std::string& name = item.key();
    if (item.value().requires_grad()) continue;
    if (ep > 1 && name.find(".experts.") != std::string::npos) continue;  // differ across ep: kept whole
    frozen.push_back({name, item.value(), optim::Sharding::kReplicated});
    numels.push_back(item.value().numel());
    units.push_back(model::parameter_unit_of(name));
  }
  if (frozen.empty()) return;
  const int size = group ? group->size() : 1, rank = group ? group->rank() : 0;
  frozen_ = std::make_unique<optim::ShardedParameters>(
      frozen, optim::ShardLayout::by_units(numels, units, size, rank), group);
  const auto& buckets = frozen_->layout().buckets;
  for (size_t b = 0; b < buckets.size(); ++b) places_[buckets[b].unit].push_back({frozen_.get(), b});
}

void Zero3Units::release_frozen(int64_t unit) {
  if (!frozen_ || holds_ > 0) return;
  for_each_place(unit, [&](optim::ShardedParameters& params, size_t b) {
    if (&params == frozen_.get()) params.release(b);
  });
}

void Zero3Units::release_frozen() {
  if (!frozen_ || holds_ > 0) return;
  for (size_t b = 0; b < frozen_->layout().buckets.size(); ++b) frozen_->release(b);
}

void Zero3Units::uninstall() {
  HPCRL_CHECK(holds_ == 0, "ZeRO-3: the parameters are uninstalled inside a WholeParameters scope");
  optimizer_.drop_state();
  for (size_t g = 0; g < optimizer_.num_groups(); ++g) {
    optimizer_.reducer(g).on_bucket_complete(nullptr);
    if (auto* params = optimizer_.sharded_parameters(g)) params->unshard();
  }
  if (frozen_) frozen_->unshard();
  model_.set_parameter_units(nullptr);
}

template <typename F>
void Zero3Units::for_each_place(int64_t unit, F&& f) const {
  if (auto it = places_.find(unit); it != places_.end())
    for (const Place& p : it->second) f(*p.params, p.bucket);
}

bool Zero3Units::gather(int64_t unit) {
  bool fresh = false;
  for_each_place(unit, [&](optim::ShardedParameters& params, size_t b) { fresh |= params.gather(b); });
  return fresh;
}

void Zero3Units::prefetch(int64_t unit) {
  if (unit == kNone) return;
  for_each_place(unit, [](optim::ShardedParameters& params, size_t b) { params.prefetch(b); });
}

void Zero3Units::release(int64_t unit) {
  for_each_place(unit, [](optim::ShardedParameters& params, size_t b) { params.release(b); });
}

int64_t Zero3Units::next_layer(int64_t unit) const {
  auto it = places_.upper_bound(unit);
  return it == places_.end() ? kNone : it->first;
}

int64_t Zero3Units::previous_layer(int64_t unit) const {
  auto it = places_.lower_bound(unit);
  if (it == places_.begin()) return kNone;
  --it;
  return it->first == kOuter ? kNone : it->first;
}

void Zero3Units::before_forward(int64_t unit) {
  // Only a unit that was just gathered starts the next one: the heads call this
  // again after the forward, when the layers must stay as they are. The next
  // layer is the next one this rank holds (a pipeline stage holds some).
  if (gather(unit)) prefetch(next_layer(unit));
}

void Zero3Units::after_forward(int64_t unit, const at::Tensor& output) {
  if (holds_ > 0) return;
  const bool backward = output.defined() && output.requires_grad();
  // The last layer's backward comes first: keep it rather than gather it again (as FSDP does).
  if (!(backward && !places_.empty() && unit == places_.rbegin()->first)) release(unit);
  if (!backward) return;
  std::weak_ptr<Zero3Units> weak = weak_from_this();
  // Runs when the gradient of `output` is complete, before the layer's own backward.
  output.register_hook([weak, unit](const at::Tensor&) {
    if (auto self = weak.lock()) self->before_backward(unit);
  });
}

void Zero3Units::write_back(int64_t unit) {
  for_each_place(unit, [](optim::ShardedParameters& params, size_t b) { params.write_back(b); });
}

void Zero3Units::before_backward(int64_t unit) {
  gather(unit);
  prefetch(previous_layer(unit));
  // The gradient of this layer's output is complete, so the layer above has
  // computed its input's gradient: its frozen weights are read no more. (Its
  // trained ones go when their gradients are handed over; a frozen weight has
  // none, and may be read after the layer's adapters got theirs.)
  release_frozen(next_layer(unit));
}

void Zero3Units::hold_all(bool writes) {
  if (holds_++ == 0)
    for (const auto& [unit, places] : places_)
      for (const Place& p : places) p.params->gather(p.bucket);
  writes_ = writes_ || writes;
}

void Zero3Units::release_all() {
  HPCRL_CHECK(holds_ > 0, "ZeRO-3: release_all without hold_all");
  if (--holds_ > 0) return;
  for (const auto& [unit, places] : places_)
    for (const Place& p : places) {
      if (writes_) p.params->write_back(p.bucket);
      p.params->release(p.bucket);
    }
  writes_ = false;
}

int64_t Zero3Units::peak_gathered_bytes() const {
  int64_t bytes = frozen_ ? frozen_->peak_gathered_bytes() : 0;
  for (size_t g = 0; g < optimizer_.num_groups(); ++g)
    if (auto* params = optimizer_.sharded_parameters(g)) bytes += params->peak_gathered_bytes();
  return bytes;
}

}  // namespace hpcrl::algo
