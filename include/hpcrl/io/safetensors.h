// Reading HF safetensors files without LibTorch. A safetensors file is
//   [u64 LE header length N][N bytes of JSON header, space padded][raw tensor bytes]
// where the header maps tensor names to {dtype, shape, data_offsets} (offsets
// relative to the start of the raw bytes) plus an optional "__metadata__" string
// map. Checkpoints come from users and downloads, so everything in the header is
// validated before a single tensor byte is touched: a truncated or corrupt file is
// an InputError that names the file, the tensor and the fix — never a crash.
// This file (and its .cpp) stays torch-free so the parser can be built alone
// under AddressSanitizer and fuzzed; the torch bridge is io/tensor_store.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hpcrl::io {

// The byte-sized element types of the safetensors format (sub-byte F4/F6 types
// are not supported and are reported as unknown).
enum class Dtype { BOOL, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, I64, U64, F64 };

size_t dtype_size(Dtype d);       // bytes per element
const char* dtype_name(Dtype d);  // "F32", as written in headers
std::optional<Dtype> parse_dtype(const std::string& name);
std::vector<std::string> dtype_names();  // every supported name, for error messages

// One tensor of a header. Offsets are relative to the start of the data section.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::F32;
  std::vector<int64_t> shape;  // [] is a scalar (1 element)
  uint64_t begin = 0;
  uint64_t end = 0;

  int64_t numel() const;
  uint64_t nbytes() const { return end - begin; }
};

// A validated header: tensors sorted by data offset, metadata, and where the
// data section starts in the file (8 + header length).
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;
  uint64_t data_size = 0;
};

// The largest header accepted (HF's limit): bigger is a corrupt length field.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Validates the first `size` bytes of a safetensors file held in memory.
// `path` only names the file in error messages. Throws InputError.
SafetensorsHeader parse_safetensors(const uint8_t* bytes, size_t size, const std::string& path);

// A safetensors file mapped read-only into memory and validated on open. Tensor
// bytes are read straight from the mapping, so touching one row range of a
// tensor reads only those pages from disk (this is how each rank loads only its
// tp/ep slice). Movable, not copyable.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // InputError on a missing/corrupt file
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }  // by offset
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  uint64_t file_size() const { return size_; }

  const TensorInfo* find(const std::string& name) const;  // nullptr when absent
  // InputError naming the file and the closest existing name when absent.
  const TensorInfo& info(const std::string& name) const;
  // First byte of the tensor's data inside the mapping (valid for nbytes()).
  const uint8_t* data(const TensorInfo& t) const;

 private:
  std::string path_;
  uint8_t* map_ = nullptr;
  size_t size_ = 0;
  SafetensorsHeader header_;
  std::map<std::string, size_t> index_;  // name → position in header_.tensors
};

}  // namespace hpcrl::io
