// Weight transfer from the training layout to the generation layout (weight_sync.h).
#include "hpcrl/rollout/weight_sync.h"

#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include <cstring>
#include <map>
#include <string>

#include "hpcrl/model/weights.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

namespace {

int64_t tensor_bytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// Names, dtypes, shapes and device kind of `full` as JSON bytes: what receivers
// allocate. Both ends of a broadcast must use the same backend (MPI for host
// tensors, NCCL for CUDA ones), so receivers follow the sender's device kind.
std::string manifest(const io::NamedTensors& full) {
  nlohmann::json doc = nlohmann::json::array();
  for (const auto& [name, t] : full)
    doc.push_back({{"name", name}, {"dtype", static_cast<int>(t.scalar_type())}, {"shape", t.sizes().vec()},
                   {"cuda", t.is_cuda()}});
  return doc.dump();
}

// Broadcasts a string from root (length first, then the bytes).
std::string broadcast_string(dist::Communicator& comm, int root, const std::string& s) {
  at::Tensor len = at::tensor({static_cast<int64_t>(s.size())}, at::kLong);
  comm.broadcast(len, root);
  at::Tensor bytes = at::empty({len.item<int64_t>()}, at::kByte);
  if (comm.rank() == root) std::memcpy(bytes.data_ptr(), s.data(), s.size());
  comm.broadcast(bytes, root);
  return std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(bytes.numel()));
}
}  // namespace

void ReleasedWeights::release(model::DecoderModel& model) {
  if (released()) return;
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters()) {
    shapes_.push_back(p.sizes().vec());
    p.set_data(at::empty({0}, p.options()));
  }
}

void ReleasedWeights::restore(model::DecoderModel& model) {
  if (!released()) return;
  torch::NoGradGuard no_grad;
  size_t i = 0;
  for (auto& p : model.parameters()) p.set_data(at::empty(shapes_.at(i++), p.options()));
  shapes_.clear();
}

WeightSyncStats reshard_weights(model::DecoderModel& source, model::DecoderModel& target) {
  torch::NoGradGuard no_grad;
  trace::TimedSpan span("weight_sync");
  io::NamedTensors full = model::gather_full_weights(source);
  WeightSyncStats stats;
  std::map<std::string, at::Tensor> by_name;
  for (auto& [name, t] : full) {
    stats.bytes += tensor_bytes(t);
    by_name.emplace(name, t);
  }
  model::load_weights(target, by_name, "the training model's weights (reshard)");
  stats.seconds = span.elapsed_seconds();
  span.add_arg("bytes", double(stats.bytes));
  return stats;
}

WeightSyncStats broadcast_weights(dist::Communicator& bridge, int root, const io::NamedTensors* full,
                                  model::DecoderModel* target) {
  torch::NoGradGuard no_grad;
  const bool is_root = bridge.rank() == root;
  HPCRL_CHECK(!is_root || full != nullptr, "the root of weight broadcast over " << bridge.name()
                                                                                << " needs the full weights");
  HPCRL_CHECK(is_root || target != nullptr, "a receiver of weight broadcast over " << bridge.name()
                                                                                   << " needs a model to load into");
  trace::TimedSpan span("weight_sync");
  nlohmann::json list = nlohmann::json::parse(broadcast_string(bridge, root, is_root ? manifest(*full) : ""));
  WeightSyncStats stats;
  std::map<std::string, at::Tensor> received;
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& entry = list[i];
    at::Tensor t;
    if (is_root) {
      t = (*full)[i].second.contiguous();
    } else {
      auto dtype = static_cast<at::ScalarType>(entry.at("dtype").get<int>());
      at::Device device = target->model->embed_tokens->weight.device();
      if (!entry.at("cuda").get<bool>()) device = at::Device(at::kCPU);
      HPCRL_CHECK(device.is_cuda() == entry.at("cuda").get<bool>(),
                  "weights broadcast over " << bridge.name() << " come from GPU memory but this rank's rollout "
                                            << "model is on the CPU; put both roles on the same device kind");
      t = at::empty(entry.at("shape").get<std::vector<int64_t>>(), at::TensorOptions().dtype(dtype).device(device));
    }
    bridge.broadcast(t, root);
    stats.bytes += tensor_bytes(t);
    if (target) received.emplace(entry.at("name").get<std::string>(), t);
  }
  if (target)
    model::load_weights(*target, received, "weights broadcast over " + bridge.name() + " from its rank " +
                                               std::to_string(root));
  stats.seconds = span.elapsed_seconds();
  span.add_arg("bytes", double(stats.bytes));
  return stats;
}

}  // namespace hpcrl::rollout
