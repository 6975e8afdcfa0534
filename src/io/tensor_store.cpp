// Copies between memory-mapped safetensors bytes and at::Tensor (see
// io/tensor_store.h). Safetensors data is little-endian, like every host
// LibTorch runs on here, so bytes are copied as they are.
#include "hpcrl/io/tensor_store.h"

#include <torch/version.h>

#include <cstring>
#include <sstream>

#include "hpcrl/io/safetensors_writer.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/error.h"

#define HPCRL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors bytes are copied as-is: needs a little-endian host");

namespace hpcrl::io {
namespace {

struct DtypePair {
  Dtype dtype;
  at::ScalarType torch;
};

constexpr DtypePair kPairs[] = {
    {Dtype::BOOL, at::kBool},
    {Dtype::U8, at::kByte},
    {Dtype::I8, at::kChar},
    {Dtype::I16, at::kShort},
    {Dtype::F16, at::kHalf},
    {Dtype::BF16, at::kBFloat16},
    {Dtype::I32, at::kInt},
    {Dtype::F32, at::kFloat},
    {Dtype::I64, at::kLong},
    {Dtype::F64, at::kDouble},
#if HPCRL_TORCH_AT_LEAST(2, 1)
    {Dtype::F8_E5M2, at::kFloat8_e5m2},
    {Dtype::F8_E4M3, at::kFloat8_e4m3fn},
#endif
#if HPCRL_TORCH_AT_LEAST(2, 3)
    {Dtype::U16, at::kUInt16},
    {Dtype::U32, at::kUInt32},
    {Dtype::U64, at::kUInt64},
#endif
};

std::string show_shape(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

std::vector<TensorToWrite> to_write(const NamedTensors& tensors) {
  std::vector<TensorToWrite> out;
  out.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    HPCRL_CHECK(t.defined(), "tensor '" << name << "' is undefined and cannot be saved");
    TensorToWrite w;
    w.name = name;
    w.dtype = from_torch_dtype(t.scalar_type(), "tensor '" + name + "'");
    w.shape = t.sizes().vec();
    at::Tensor held = t;
    // Host copy made only when the writer reaches this tensor, then dropped.
    w.write_bytes = [held](const ByteSink& sink) {
      at::Tensor c = held.detach().to(at::kCPU).contiguous();
      if (c.numel() > 0) sink(c.data_ptr(), static_cast<size_t>(c.numel()) * c.element_size());
    };
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

at::ScalarType to_torch_dtype(Dtype d, const std::string& where) {
  for (const auto& p : kPairs)
    if (p.dtype == d) return p.torch;
  throw InputError(where + " has dtype " + dtype_name(d) + ", which LibTorch " + TORCH_VERSION +
                   " cannot hold (convert the checkpoint to BF16/F16/F32 or use a newer LibTorch)");
}

Dtype from_torch_dtype(at::ScalarType t, const std::string& where) {
  for (const auto& p : kPairs)
    if (p.torch == t) return p.dtype;
  throw InputError(where + " has torch dtype " + std::string(c10::toString(t)) +
                   ", which safetensors cannot store (convert it first)");
}

TensorStore::TensorStore(const std::string& path) : dir_(path) {}

std::string TensorStore::where(const std::string& name) const {
  return dir_.file_of(name).path() + ": tensor '" + name + "'";
}

at::Tensor TensorStore::load_tensor(const std::string& name, std::optional<at::ScalarType> dtype) const {
  const TensorInfo& info = dir_.info(name);
  at::Tensor out = at::empty(info.shape, at::TensorOptions().dtype(to_torch_dtype(info.dtype, where(name))));
  if (info.nbytes() > 0) std::memcpy(out.data_ptr(), dir_.data(name), info.nbytes());
  return dtype && *dtype != out.scalar_type() ? out.to(*dtype) : out;
}

at::Tensor TensorStore::load_narrow(const std::string& name, int64_t dim, int64_t start, int64_t length,
                                    std::optional<at::ScalarType> dtype) const {
  const TensorInfo& info = dir_.info(name);
  const auto& shape = info.shape;
  int64_t ndim = static_cast<int64_t>(shape.size());
  HPCRL_CHECK_INPUT(dim >= -ndim && dim < ndim, where(name) << " has shape " << show_shape(shape) << ", no dim " << dim
                                                            << " to slice (check the checkpoint matches the model)");
  if (dim < 0) dim += ndim;
  HPCRL_CHECK_INPUT(start >= 0 && length >= 0 && start + length <= shape[dim],
                    where(name) << " has shape " << show_shape(shape) << ": [" << start << ", " << start + length
                                << ") along dim " << dim
                                << " is out of range (check the checkpoint matches the model config)");
  std::vector<int64_t> out_shape = shape;
  out_shape[dim] = length;
  at::Tensor out = at::empty(out_shape, at::TensorOptions().dtype(to_torch_dtype(info.dtype, where(name))));

  // View the tensor as [outer, shape[dim], inner]; copy rows [start, start+length) of each outer block.
  size_t inner = dtype_size(info.dtype);
  for (int64_t i = dim + 1; i < ndim; ++i) inner *= static_cast<size_t>(shape[i]);
  int64_t outer = 1;
  for (int64_t i = 0; i < dim; ++i) outer *= shape[i];
  size_t block = static_cast<size_t>(length) * inner;
  size_t src_stride = static_cast<size_t>(shape[dim]) * inner;
  if (block > 0) {
    const uint8_t* src = dir_.data(name) + static_cast<size_t>(start) * inner;
    auto* dst = static_cast<uint8_t*>(out.data_ptr());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + o * block, src + o * src_stride, block);
  }
  return dtype && *dtype != out.scalar_type() ? out.to(*dtype) : out;
}

at::Tensor TensorStore::load_slice(const std::string& name, int64_t dim, int64_t index, int64_t parts,
                                   std::optional<at::ScalarType> dtype) const {
  HPCRL_CHECK(parts > 0 && index >= 0 && index < parts, "slice " << index << " of " << parts << " is not valid");
  const TensorInfo& info = dir_.info(name);
  int64_t ndim = static_cast<int64_t>(info.shape.size());
  HPCRL_CHECK_INPUT(dim >= -ndim && dim < ndim, where(name)
                                                    << " has shape " << show_shape(info.shape) << ", no dim " << dim
                                                    << " to split (check the checkpoint matches the model)");
  int64_t d = dim < 0 ? dim + ndim : dim;
  int64_t size = info.shape[d];
  HPCRL_CHECK_INPUT(size % parts == 0, where(name) << " has shape " << show_shape(info.shape) << ": dim " << d << " ("
                                                   << size << ") does not split into " << parts
                                                   << " equal parts (choose a tp/ep size that divides it)");
  int64_t chunk = size / parts;
  return load_narrow(name, d, index * chunk, chunk, dtype);
}

void save_tensors(const std::string& path, const NamedTensors& tensors, std::map<std::string, std::string> metadata) {
  metadata.emplace("format", "pt");
  write_safetensors(path, to_write(tensors), metadata);
}

std::vector<std::string> save_tensors_sharded(const std::string& dir, const NamedTensors& tensors,
                                              std::map<std::string, std::string> metadata, uint64_t max_shard_bytes) {
  metadata.emplace("format", "pt");
  return write_safetensors_sharded(dir, to_write(tensors), metadata, max_shard_bytes);
}

}  // namespace hpcrl::io
