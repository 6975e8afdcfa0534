// Weights of a DecoderModel as HF tensors (weights.h). One loading routine
// serves checkpoints and in-memory tensors through a small source interface;
// the ShardSpecs of the parallel layers decide which slice each rank reads.
#include "hpcrl/model/weights.h"

#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "hpcrl/model/streamed_save.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::model {

namespace tensor = parallel::tensor;

namespace {

constexpr double kInitStd = 0.02;  // HF initializer_range

uint64_t fnv1a(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ULL ^ (seed * 0x9e3779b97f4a7c15ULL);
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::vector<int64_t> full_shape(const at::Tensor& local, const tensor::ShardSpec& spec) {
  std::vector<int64_t> shape(local.sizes().begin(), local.sizes().end());
  if (!spec.whole()) shape[spec.dim] *= spec.chunks;
  return shape;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(std::to_string(d));
  return "[" + str::join(dims, ", ") + "]";
}

// Names of MoE parameters (initialised by their block; experts gathered over ep).
std::set<std::string> moe_parameter_names(DecoderModel& m) {
  std::set<std::string> names;
  for (size_t i = 0; i < m.model->layers->size(); ++i) {
    auto layer = m.model->layers->ptr<DecoderLayer>(i);
    if (!layer || !layer->moe) continue;  // another pp stage's layer, or a dense one
    const std::string prefix = "model.layers." + std::to_string(i) + ".";
    for (const auto& p : layer->moe->hf_parameters()) names.insert(prefix + p.name);
  }
  return names;
}

// Where full HF tensors come from.
class Source {
 public:
  virtual ~Source() = default;
  virtual std::string name() const = 0;
  virtual bool contains(const std::string& t) const = 0;
  virtual std::vector<int64_t> shape(const std::string& t) const = 0;
  // "" when tensor `t` holds floating-point values the model can take, else its dtype's name.
  virtual std::string non_floating_dtype(const std::string& t) const = 0;
  virtual at::Tensor read(const std::string& t, const tensor::ShardSpec& spec, at::ScalarType dtype) const = 0;
  virtual std::vector<std::string> names() const = 0;
};

class StoreSource : public Source {
 public:
  explicit StoreSource(const io::TensorStore& s) : s_(s) {}
  std::string name() const override { return s_.checkpoint().source(); }
  bool contains(const std::string& t) const override { return s_.contains(t); }
  std::vector<int64_t> shape(const std::string& t) const override { return s_.info(t).shape; }
  std::string non_floating_dtype(const std::string& t) const override {
    const io::Dtype d = s_.info(t).dtype;
    const bool floating = d == io::Dtype::F16 || d == io::Dtype::BF16 || d == io::Dtype::F32 || d == io::Dtype::F64;
    return floating ? "" : io::dtype_name(d);
  }
  at::Tensor read(const std::string& t, const tensor::ShardSpec& spec, at::ScalarType dtype) const override {
    if (spec.whole()) return s_.load_tensor(t, dtype);
    return s_.load_slice(t, spec.dim, spec.index, spec.chunks, dtype);
  }
  std::vector<std::string> names() const override { return s_.names(); }

 private:
  const io::TensorStore& s_;
};

class MapSource : public Source {
 public:
  MapSource(const std::map<std::string, at::Tensor>& m, std::string name) : m_(m), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  bool contains(const std::string& t) const override { return m_.count(t) > 0; }
  std::vector<int64_t> shape(const std::string& t) const override {
    auto s = m_.at(t).sizes();
    return {s.begin(), s.end()};
  }
  std::string non_floating_dtype(const std::string& t) const override {
    const at::ScalarType d = m_.at(t).scalar_type();
    return at::isFloatingType(d) ? "" : std::string(c10::toString(d));
  }
  at::Tensor read(const std::string& t, const tensor::ShardSpec& spec, at::ScalarType dtype) const override {
    return spec.slice(m_.at(t)).to(dtype);
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> n;
    for (const auto& kv : m_) n.push_back(kv.first);
    return n;
  }

 private:
  const std::map<std::string, at::Tensor>& m_;
  std::string name_;
};

// Whether `name` is part of the given view of the model (adapter: what trains).
bool in_view(const std::string& name, AdapterView view) {
  const bool adapter = tensor::is_lora_tensor(name) || name == "score.weight";
  return view == AdapterView::adapter ? adapter : !tensor::is_lora_tensor(name);
}

// Calls visit(names) for the given parameter names unit by unit (the outer
// unit first, then the layers in order). Under ZeRO-3 each unit is gathered
// for its call (the next one prefetched) and released after it, so a rank
// never holds the gathered model; `writes`: the shards take what visit wrote.
// Collective like a forward: every rank of a shard group walks the same units.
template <typename Visit>
void walk_units(DecoderModel& m, const std::vector<std::string>& names, bool writes, Visit&& visit) {
  std::map<int64_t, std::vector<std::string>> by_unit;
  for (const auto& name : names) by_unit[parameter_unit_of(name)].push_back(name);
  ParameterUnits* units = m.parameter_units();
  for (const auto& [unit, in_unit] : by_unit) {
    if (units) units->before_forward(unit);
    visit(in_unit);
    if (units && writes) units->write_back(unit);
    if (units) units->after_forward(unit, at::Tensor());
  }
}

// Loads parameter `name` (this rank's slice `spec` of it) from `src`, which holds it.
void load_parameter(const Source& src, const std::string& name, const tensor::ShardSpec& spec, at::Tensor& p) {
  std::vector<int64_t> expected = full_shape(p, spec), got = src.shape(name);
  HPCRL_CHECK_INPUT(got == expected, src.name() << ": tensor '" << name << "' has shape " << shape_str(got)
                                                << " but the model (its config.json) expects " << shape_str(expected)
                                                << "; the checkpoint and config.json do not belong together");
  // Integer bytes read as weights load "fine" and train to nonsense (a loss of 1e9).
  const std::string dtype = src.non_floating_dtype(name);
  HPCRL_CHECK_INPUT(dtype.empty(), src.name() << ": tensor '" << name << "' is stored as " << dtype
                                              << ", not a floating type; model weights are F32, BF16, F16 or F64 "
                                                 "(re-save the checkpoint with floating-point weights)");
  at::Tensor t = src.read(name, spec, p.scalar_type());
  p.copy_(t.to(p.device()));
}

void load_from(DecoderModel& m, const Source& src, AdapterView view = AdapterView::base) {
  at::NoGradGuard no_grad;
  auto params = m.named_parameters(/*recurse=*/true);
  auto specs = m.shard_specs();
  // ZeRO-3: a resumed rank never holds the gathered model beside its shard.
  // Every rank walks every unit of its model, whatever the view loads.
  std::vector<std::string> names;
  for (const auto& [name, spec] : specs) names.push_back(name);
  std::vector<std::string> missing;
  std::set<std::string> used;
  walk_units(m, names, /*writes=*/true, [&](const std::vector<std::string>& in_unit) {
    for (const auto& name : in_unit) {
      if (!in_view(name, view)) continue;
      if (src.contains(name)) {
        load_parameter(src, name, specs.at(name), params[name]);
        used.insert(name);
      } else if (name == "score.weight" && view != AdapterView::adapter) {
        spdlog::info("{}: no value head (score.weight); keeping its initial weights", src.name());
        std::set<std::string> only{name};
        init_weights(m, m.options().seed, &only);
      } else {
        missing.push_back(name);
      }
    }
  });
  if (!missing.empty()) {
    std::vector<std::string> shown(missing.begin(), missing.begin() + std::min<size_t>(missing.size(), 5));
    throw InputError(src.name() + ": " + std::to_string(missing.size()) + " tensor(s) the model needs are missing: " +
                     str::join(shown, ", ") + (missing.size() > 5 ? ", ..." : "") +
                     "; is this a checkpoint of the architecture in config.json?");
  }
  // Tensors present but unused: a tied checkpoint's lm_head, other ranks' experts, or a real mismatch.
  std::vector<std::string> unused;
  const bool moe = m.arch().num_experts > 0;
  for (const auto& n : src.names()) {
    if (used.count(n) || (n == "lm_head.weight" && m.arch().tie_word_embeddings)) continue;
    if (m.on_other_stage(n)) continue;
    if (moe && n.find(".experts.") != std::string::npos) continue;
    if (n == "score.weight" || (n == "lm_head.weight" && !m.options().lm_head)) continue;
    unused.push_back(n);
  }
  if (!unused.empty())
    spdlog::warn("{}: {} tensor(s) not used by the model, e.g. {}", src.name(), unused.size(), unused.front());
}

// Every expert of an MoE layer on every ep rank: the owner broadcasts each.
void gather_experts(DecoderModel& m, io::NamedTensors& out) {
  const auto& ctx = m.parallel_context();
  for (size_t i = 0; i < m.model->layers->size(); ++i) {
    auto layer = m.model->layers->ptr<DecoderLayer>(i);
    if (!layer || !layer->moe) continue;  // another pp stage's layer, or a dense one
    const std::string prefix = "model.layers." + std::to_string(i) + "." + MoeBlock::hf_module_name(m.arch()) +
                               ".experts.";
    const auto& local = layer->moe->experts();
    const int64_t per_rank = static_cast<int64_t>(local.size());
    for (int64_t e = 0; e < m.arch().num_experts; ++e) {
      const int owner = static_cast<int>(e / per_rank);
      for (const auto& p : local.front()->named_parameters()) {
        at::Tensor t = owner == ctx.ep_rank() ? local[e - layer->moe->first_local_expert()]->named_parameters()[p.key()]
                                                    .detach()
                                                    .clone()
                                              : at::empty_like(p.value());
        dist::broadcast(ctx.ep, t, owner);
        out.emplace_back(prefix + std::to_string(e) + "." + p.key(), t);
      }
    }
  }
}

// Every pp stage's tensors on every rank of the pp group: each stage in turn
// broadcasts a description (one "name<TAB>dtype<TAB>d0,d1,..." line per tensor)
// and then the tensors, so receivers allocate without knowing the other stages.
// The tied embedding, held by the first and the last stage, is kept once.
void gather_pipeline_stages(DecoderModel& m, io::NamedTensors& out) {
  const dist::CommPtr& pp = m.parallel_context().pp;
  const at::Device device = m.parameters().front().device();
  io::NamedTensors all;
  std::set<std::string> seen;
  for (int s = 0; s < pp->size(); ++s) {
    const bool mine = s == pp->rank();
    std::string desc;
    if (mine) {
      for (const auto& [name, t] : out) {
        std::vector<std::string> dims;
        for (int64_t d : t.sizes()) dims.push_back(std::to_string(d));
        desc += name + "\t" + std::to_string(static_cast<int>(t.scalar_type())) + "\t" + str::join(dims, ",") + "\n";
      }
    }
    at::Tensor len = at::full({1}, static_cast<int64_t>(desc.size()), at::kLong);
    pp->broadcast(len, s);
    at::Tensor bytes = at::empty({len.item<int64_t>()}, at::kByte);
    if (mine) std::memcpy(bytes.data_ptr(), desc.data(), desc.size());
    if (bytes.numel() > 0) pp->broadcast(bytes, s);
    const std::string text(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(bytes.numel()));
    size_t index = 0;
    for (const std::string& line : str::split(text, '\n')) {
      if (line.empty()) continue;
      const std::vector<std::string> f = str::split(line, '\t');
      HPCRL_CHECK(f.size() == 3, "pp weight gather: malformed description line '" << line << "'");
      at::Tensor t;
      if (mine) {
        t = out[index++].second;
      } else {
        std::vector<int64_t> shape;
        for (const std::string& d : str::split(f[2], ',')) if (!d.empty()) shape.push_back(std::stoll(d));
        t = at::empty(shape, at::TensorOptions().dtype(static_cast<at::ScalarType>(std::stoi(f[1]))).device(device));
      }
      pp->broadcast(t, s);
      if (seen.insert(f[0]).second) all.emplace_back(f[0], t);
    }
  }
  out = std::move(all);
}

}  // namespace

void init_weights(DecoderModel& m, uint64_t seed, const std::set<std::string>* only) {
  at::NoGradGuard no_grad;
  auto params = m.named_parameters(/*recurse=*/true);
  std::set<std::string> moe = moe_parameter_names(m);
  for (const auto& [name, spec] : m.shard_specs()) {
    if (moe.count(name) || (only && !only->count(name))) continue;
    at::Tensor& p = params[name];
    at::Tensor full;
    if (str::ends_with(name, "norm.weight")) {
      full = at::ones(full_shape(p, spec));
    } else if (str::ends_with(name, ".lora_B.weight")) {
      full = at::zeros(full_shape(p, spec));  // the adapted model starts as its base
    } else if (str::ends_with(name, ".lora_A.weight")) {
      // PEFT's default: kaiming_uniform(a=√5), i.e. U(±1/√fan_in).
      const std::vector<int64_t> shape = full_shape(p, spec);
      const double bound = 1.0 / std::sqrt(double(shape[1]));
      at::Generator gen = at::detail::createCPUGenerator(fnv1a(name, seed));
      full = at::empty(shape).uniform_(-bound, bound, gen);
    } else if (str::ends_with(name, ".bias")) {
      full = at::zeros(full_shape(p, spec));
    } else {
      at::Generator gen = at::detail::createCPUGenerator(fnv1a(name, seed));
      full = at::empty(full_shape(p, spec)).normal_(0.0, kInitStd, gen);
    }
    p.copy_(spec.slice(full));
  }
}

void load_weights(DecoderModel& m, const io::TensorStore& checkpoint) { load_from(m, StoreSource(checkpoint)); }

void load_weights(DecoderModel& m, const std::map<std::string, at::Tensor>& full, const std::string& source,
                  AdapterView view) {
  load_from(m, MapSource(full, source), view);
}

namespace {
// Folds every adapter into its base weight (merge_lora) and drops the factors.
// `full` holds whole tensors (after the tp gather).
void merge_adapters(DecoderModel& m, io::NamedTensors& full) {
  std::map<std::string, at::Tensor> factors;
  for (const auto& [name, t] : full)
    if (tensor::is_lora_tensor(name)) factors[name] = t;
  if (factors.empty()) return;
  std::map<std::string, double> scales;
  for (const auto& mod : m.named_modules("", /*include_self=*/false))
    if (auto* f = dynamic_cast<tensor::LoraFactor*>(mod.value().get())) scales[mod.key() + ".weight"] = f->scale();
  io::NamedTensors merged;
  for (auto& [name, t] : full) {
    if (tensor::is_lora_tensor(name)) continue;
    const std::string prefix = name.substr(0, name.size() - std::string("weight").size());
    auto a = factors.find(prefix + "lora_A.weight"), b = factors.find(prefix + "lora_B.weight");
    if (str::ends_with(name, ".weight") && a != factors.end() && b != factors.end()) {
      t = tensor::merge_lora(t, b->second, a->second, scales.at(b->first));
    }
    merged.emplace_back(name, t);
  }
  full = std::move(merged);
}
}  // namespace

at::Tensor gather_tp(const at::Tensor& p, const tensor::ShardSpec& spec, const dist::CommPtr& tp) {
  if (spec.whole()) return p.detach().clone();
  HPCRL_CHECK(tp && tp->size() % spec.chunks == 0, "parameter split into " << spec.chunks << " chunks without tp");
  at::Tensor all = tp->all_gather(p.detach().contiguous(), spec.dim);  // tp slices along dim
  const int64_t per_chunk = tp->size() / spec.chunks;
  if (per_chunk == 1) return all;
  std::vector<at::Tensor> chunks;
  const int64_t w = p.size(spec.dim);
  for (int64_t c = 0; c < spec.chunks; ++c) chunks.push_back(all.narrow(spec.dim, c * per_chunk * w, w));
  return at::cat(chunks, spec.dim);
}

io::NamedTensors gather_full_weights(DecoderModel& m, AdapterView view) {
  // ZeRO-3 copies one unit at a time (a checkpoint of a 500 M model: 2 GiB
  // less at its peak than beside the gathered model). A MoE model's experts
  // are gathered below, layer by layer over ep: every unit is held for the call.
  std::optional<WholeParameters> whole;
  if (m.parameter_units() && m.arch().num_experts > 0) whole.emplace(m);
  auto params = m.named_parameters(/*recurse=*/true);
  auto specs = m.shard_specs();
  std::set<std::string> moe = moe_parameter_names(m);
  std::vector<std::string> names;
  for (const auto& p : params) {
    const std::string& name = p.key();
    if (moe.count(name) && name.find(".experts.") != std::string::npos) continue;  // gathered below
    if (view != AdapterView::merged && !in_view(name, view)) continue;  // merged: all of them, folded below
    names.push_back(name);
  }
  std::map<std::string, at::Tensor> copies;
  walk_units(m, names, /*writes=*/false, [&](const std::vector<std::string>& in_unit) {
    for (const auto& name : in_unit) copies[name] = gather_tp(params[name], specs.at(name), m.parallel_context().tp);
  });
  io::NamedTensors out;
  for (const auto& p : params)
    if (auto it = copies.find(p.key()); it != copies.end()) out.emplace_back(p.key(), std::move(it->second));
  if (view != AdapterView::adapter) gather_experts(m, out);
  if (view == AdapterView::merged) merge_adapters(m, out);
  if (!m.is_whole()) gather_pipeline_stages(m, out);
  return out;
}

void write_hf_config(const DecoderModel& m, const std::string& dir, at::ScalarType dtype) {
  ModelArch arch = m.arch();
  arch.torch_dtype = dtype == at::kBFloat16 ? "bfloat16" : "float32";
  fs::write_file_atomic(dir + "/config.json", to_hf_config_json(arch));
}

void save_pretrained(DecoderModel& m, const std::string& dir, bool writer, AdapterView view,
                     uint64_t max_shard_bytes) {
  if (can_stream_save(m, view)) return save_pretrained_streamed(m, dir, writer, max_shard_bytes);
  io::NamedTensors full = gather_full_weights(m, view);
  if (!writer) return;
  io::save_tensors_sharded(dir, full, {{"format", "pt"}}, max_shard_bytes);
  write_hf_config(m, dir, full.empty() ? at::kFloat : full.front().second.scalar_type());
}

}  // namespace hpcrl::model
