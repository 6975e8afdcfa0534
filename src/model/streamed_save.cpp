// HF checkpoints written tensor by tensor (streamed_save.h).
#include "hpcrl/model/streamed_save.h"

#include <torch/utils.h>

#include <algorithm>
#include <vector>

#include "hpcrl/io/safetensors_writer.h"
#include "hpcrl/model/parameter_units.h"
#include "hpcrl/parallel/tensor/lora.h"
#include "hpcrl/util/check.h"

namespace hpcrl::model {

namespace {

// ZeRO-3's gathers along a walk over tensor names: the outer unit held
// throughout, one layer at a time otherwise. A no-op without parameter units.
class UnitWalk {
 public:
  explicit UnitWalk(ParameterUnits* units) : units_(units) {
    if (units_) units_->before_forward(ParameterUnits::kOuter);
  }
  // Precondition: the walk reaches each layer's tensors in one run (names sort by layer prefix).
  void enter(int64_t unit) {
    if (!units_ || unit == ParameterUnits::kOuter || unit == layer_) return;
    leave_layer();
    units_->before_forward(unit);
    layer_ = unit;
  }
  // Releases what the walk holds; collective, so not left to a destructor that an exception runs.
  void finish() {
    if (!units_) return;
    leave_layer();
    units_->after_forward(ParameterUnits::kOuter, at::Tensor());
  }

 private:
  void leave_layer() {
    if (layer_ != kNoLayer) units_->after_forward(layer_, at::Tensor());
    layer_ = kNoLayer;
  }
  static constexpr int64_t kNoLayer = -2;
  ParameterUnits* units_;
  int64_t layer_ = kNoLayer;
};

// The full shape of a parameter that `spec` splits over tp.
std::vector<int64_t> full_shape(const at::Tensor& p, const parallel::tensor::ShardSpec& spec) {
  std::vector<int64_t> shape = p.sizes().vec();
  if (!spec.whole()) shape[spec.dim] *= spec.chunks;
  return shape;
}

}  // namespace

bool can_stream_save(DecoderModel& m, AdapterView view) {
  if (!m.is_whole() || m.arch().num_experts > 0 || view == AdapterView::adapter) return false;
  const auto params = m.parameters();
  for (const auto& item : m.named_parameters())
    if (parallel::tensor::is_lora_tensor(item.key()) || item.value().scalar_type() != params.front().scalar_type())
      return false;
  return !params.empty();
}

void save_pretrained_streamed(DecoderModel& m, const std::string& dir, bool writer, uint64_t max_shard_bytes) {
  HPCRL_CHECK(can_stream_save(m, AdapterView::merged), "this model cannot be saved tensor by tensor");
  torch::NoGradGuard no_grad;
  auto params = m.named_parameters(/*recurse=*/true);
  const auto specs = m.shard_specs();
  const dist::CommPtr& tp = m.parallel_context().tp;
  std::vector<std::string> names;
  for (const auto& item : params) names.push_back(item.key());
  std::sort(names.begin(), names.end());  // the writer's order for tensors of one dtype
  const at::ScalarType dtype = params[names.front()].scalar_type();

  UnitWalk walk(m.parameter_units());
  // The full tensor, gathered only where it is split (a whole one is read in place).
  auto full = [&](const std::string& name) {
    walk.enter(parameter_unit_of(name));
    const auto& spec = specs.at(name);
    const at::Tensor& p = params[name];
    return spec.whole() ? p.detach() : gather_tp(p, spec, tp);
  };
  if (writer) {
    std::vector<io::TensorToWrite> tensors;
    for (const auto& name : names) {
      io::TensorToWrite t;
      t.name = name;
      t.dtype = io::from_torch_dtype(dtype, "parameter '" + name + "'");
      t.shape = full_shape(params[name], specs.at(name));
      t.write_bytes = [&full, name](const io::ByteSink& sink) {
        at::Tensor host = full(name).to(at::kCPU).contiguous();
        if (host.numel() > 0) sink(host.data_ptr(), size_t(host.numel()) * host.element_size());
      };
      tensors.push_back(std::move(t));
    }
    io::write_safetensors_sharded(dir, tensors, {{"format", "pt"}}, max_shard_bytes);
    write_hf_config(m, dir, dtype);
  } else {
    for (const auto& name : names) full(name);  // the writer's gathers, in its order
  }
  walk.finish();
}

}  // namespace hpcrl::model
