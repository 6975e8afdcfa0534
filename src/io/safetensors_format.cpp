// The torch-free safetensors parser (see io/safetensors.h). Validation order
// follows the file: length field, header bounds, JSON, each tensor entry, then
// the ranges against each other. Every number from the file is treated as
// hostile (overflow-checked) because this code is fuzzed under ASan.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <utility>

#include "hpcrl/io/safetensors.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::io {
namespace {

using json = nlohmann::json;

struct DtypeEntry {
  Dtype dtype;
  const char* name;
  size_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {Dtype::BOOL, "BOOL", 1},       {Dtype::U8, "U8", 1},           {Dtype::I8, "I8", 1},
    {Dtype::F8_E5M2, "F8_E5M2", 1}, {Dtype::F8_E4M3, "F8_E4M3", 1}, {Dtype::F8_E8M0, "F8_E8M0", 1},
    {Dtype::I16, "I16", 2},         {Dtype::U16, "U16", 2},         {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2},       {Dtype::I32, "I32", 4},         {Dtype::U32, "U32", 4},
    {Dtype::F32, "F32", 4},         {Dtype::I64, "I64", 8},         {Dtype::U64, "U64", 8},
    {Dtype::F64, "F64", 8},
};

// Header JSON nests three levels; anything much deeper is garbage. Refusing it
// before parsing matters: 50 M nested "[" (within the header limit) would make
// the parser allocate gigabytes of nested arrays.
constexpr int kMaxJsonDepth = 16;

const std::string kCorrupt = " (the file is corrupt or not a safetensors file: re-download or re-save it)";
const std::string kTruncated = " (the file is truncated, e.g. an interrupted download or copy: re-download it)";

[[noreturn]] void fail(const std::string& path, const std::string& message) { throw InputError(path + ": " + message); }

[[noreturn]] void fail_tensor(const std::string& path, const std::string& name, const std::string& message) {
  throw InputError(path + ": tensor '" + name + "': " + message);
}

// A JSON value as it appeared, shortened so a huge bad value cannot flood the message.
std::string show(const json& v) {
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

std::string show_shape(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << "]";
  return os.str();
}

std::string show_range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Deepest [ / { nesting outside of strings.
int json_depth(const uint8_t* p, size_t n) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < n; ++i) {
    uint8_t c = p[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > kMaxJsonDepth) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

json parse_header_json(const uint8_t* p, size_t n, const std::string& path) {
  if (json_depth(p, n) > kMaxJsonDepth)
    fail(path, "header JSON nests deeper than " + std::to_string(kMaxJsonDepth) + " levels" + kCorrupt);
  // nlohmann keeps the last of duplicate keys silently; a header naming a tensor
  // twice is corrupt, so catch it while parsing.
  std::set<std::string> top_keys;
  std::string duplicate;
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && duplicate.empty() &&
        !top_keys.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(p, p + n, on_event);
  } catch (const json::exception& e) {
    fail(path, std::string("header is not valid JSON (") + e.what() + ")" + kCorrupt);
  }
  if (!duplicate.empty()) fail(path, "header names tensor '" + duplicate + "' twice" + kCorrupt);
  return header;
}

std::map<std::string, std::string> parse_metadata(const json& m, const std::string& path) {
  if (!m.is_object())
    fail(path, std::string("__metadata__ must be an object of string values, got ") + m.type_name() + kCorrupt);
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : m.items()) {
    if (!v.is_string()) fail(path, "__metadata__ key '" + k + "' must be a string, got " + show(v) + kCorrupt);
    out[k] = v.get<std::string>();
  }
  return out;
}

const json& require_key(const json& entry, const char* key, const std::string& path, const std::string& name) {
  auto it = entry.find(key);
  if (it == entry.end())
    fail_tensor(path, name,
                std::string("missing key \"") + key + "\" (each entry needs dtype, shape, data_offsets)" + kCorrupt);
  return *it;
}

Dtype parse_entry_dtype(const json& v, const std::string& path, const std::string& name) {
  if (!v.is_string()) fail_tensor(path, name, "dtype must be a string such as \"F32\", got " + show(v) + kCorrupt);
  std::string s = v.get<std::string>();
  if (auto d = parse_dtype(s)) return *d;
  std::string msg = "unknown dtype \"" + s + "\" (supported: " + str::join(dtype_names(), ", ") + ")";
  std::string guess = str::closest(s, dtype_names());
  if (!guess.empty()) msg += "; did you mean " + guess + "?";
  fail_tensor(path, name, msg);
}

std::vector<int64_t> parse_entry_shape(const json& v, const std::string& path, const std::string& name) {
  if (!v.is_array())
    fail_tensor(path, name, "shape must be an array of non-negative integers, got " + show(v) + kCorrupt);
  std::vector<int64_t> shape;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& d = v[i];
    std::string where = "shape[" + std::to_string(i) + "]";
    if (d.is_number_integer() && !d.is_number_unsigned() && d.get<int64_t>() < 0)
      fail_tensor(path, name, where + " is " + show(d) + ": dimensions must be non-negative" + kCorrupt);
    if (!d.is_number_unsigned())
      fail_tensor(path, name, where + " must be a non-negative integer, got " + show(d) + kCorrupt);
    uint64_t u = d.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX))
      fail_tensor(path, name, where + " = " + std::to_string(u) + " is too large" + kCorrupt);
    shape.push_back(static_cast<int64_t>(u));
  }
  return shape;
}

std::pair<uint64_t, uint64_t> parse_entry_offsets(const json& v, const std::string& path, const std::string& name) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_unsigned() || !v[1].is_number_unsigned())
    fail_tensor(path, name, "data_offsets must be [begin, end] with non-negative integers, got " + show(v) + kCorrupt);
  uint64_t begin = v[0].get<uint64_t>(), end = v[1].get<uint64_t>();
  if (begin > end) fail_tensor(path, name, "data_offsets " + show_range(begin, end) + " begin after end" + kCorrupt);
  return {begin, end};
}

TensorInfo parse_entry(const std::string& name, const json& entry, const SafetensorsHeader& h, uint64_t file_size,
                       const std::string& path) {
  if (!entry.is_object())
    fail_tensor(
        path, name,
        std::string("entry must be an object {dtype, shape, data_offsets}, got ") + entry.type_name() + kCorrupt);
  TensorInfo t;
  t.name = name;
  t.dtype = parse_entry_dtype(require_key(entry, "dtype", path, name), path, name);
  t.shape = parse_entry_shape(require_key(entry, "shape", path, name), path, name);
  std::tie(t.begin, t.end) = parse_entry_offsets(require_key(entry, "data_offsets", path, name), path, name);

  uint64_t need = dtype_size(t.dtype);
  for (int64_t d : t.shape)
    if (__builtin_mul_overflow(need, static_cast<uint64_t>(d), &need))
      fail_tensor(path, name,
                  "shape " + show_shape(t.shape) + " is too large (byte size overflows 64 bits)" + kCorrupt);
  if (need != t.nbytes())
    fail_tensor(path, name,
                "shape " + show_shape(t.shape) + " of " + dtype_name(t.dtype) + " needs " + std::to_string(need) +
                    " bytes but data_offsets " + show_range(t.begin, t.end) + " span " + std::to_string(t.nbytes()) +
                    kCorrupt);
  if (t.end > h.data_size)
    fail_tensor(path, name,
                "data_offsets " + show_range(t.begin, t.end) + " end past the data section (" +
                    std::to_string(h.data_size) + " bytes): expected a file of at least " +
                    std::to_string(h.data_start + t.end) + " bytes, got " + std::to_string(file_size) + kTruncated);
  return t;
}

void check_no_overlap(const std::vector<TensorInfo>& sorted, const std::string& path) {
  const TensorInfo* reach = nullptr;  // the non-empty tensor that ends furthest so far
  for (const TensorInfo& t : sorted) {
    if (t.nbytes() == 0) continue;
    if (reach && t.begin < reach->end)
      fail(path, "tensors '" + reach->name + "' data_offsets " + show_range(reach->begin, reach->end) + " and '" +
                     t.name + "' " + show_range(t.begin, t.end) + " overlap" + kCorrupt);
    if (!reach || t.end > reach->end) reach = &t;
  }
}

}  // namespace

size_t dtype_size(Dtype d) {
  for (const auto& e : kDtypes)
    if (e.dtype == d) return e.size;
  return 0;
}

const char* dtype_name(Dtype d) {
  for (const auto& e : kDtypes)
    if (e.dtype == d) return e.name;
  return "?";
}

std::optional<Dtype> parse_dtype(const std::string& name) {
  for (const auto& e : kDtypes)
    if (name == e.name) return e.dtype;
  return std::nullopt;
}

std::vector<std::string> dtype_names() {
  std::vector<std::string> out;
  for (const auto& e : kDtypes) out.emplace_back(e.name);
  return out;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;  // validated: numel × dtype size fits the file
  return n;
}

SafetensorsHeader parse_safetensors(const uint8_t* bytes, size_t size, const std::string& path) {
  if (size < 8)
    fail(path, "file is " + std::to_string(size) +
                   " bytes, too short for a safetensors file (it must start with an 8-byte header length)" + kCorrupt);
  uint64_t n = read_u64_le(bytes);
  if (n > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(n) + " is larger than the " + std::to_string(kMaxHeaderBytes) +
                   "-byte limit" + kCorrupt);
  if (8 + n > size)
    fail(path, "header length " + std::to_string(n) + " runs past the end of the file: expected at least " +
                   std::to_string(8 + n) + " bytes, got " + std::to_string(size) + kTruncated);

  json header = parse_header_json(bytes + 8, n, path);
  if (!header.is_object())
    fail(path, std::string("header must be a JSON object of tensor entries, got ") + header.type_name() + kCorrupt);

  SafetensorsHeader h;
  h.data_start = 8 + n;
  h.data_size = size - h.data_start;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      h.metadata = parse_metadata(entry, path);
      continue;
    }
    h.tensors.push_back(parse_entry(name, entry, h, size, path));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  check_no_overlap(h.tensors, path);
  return h;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) throw InputError("safetensors file not found: " + path + " (check the path)");
    throw InputError("cannot open safetensors file " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path + " is not a regular file; give the path of a .safetensors file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ >= 8) {  // a zero-length mapping is invalid; parse_safetensors reports short files
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      throw InputError("cannot map safetensors file " + path + ": " + std::strerror(err));
    }
    map_ = static_cast<uint8_t*>(m);
  }
  ::close(fd);
  try {
    static const uint8_t kEmpty[1] = {0};
    header_ = parse_safetensors(map_ ? map_ : kEmpty, size_, path);
  } catch (...) {
    if (map_) ::munmap(map_, size_);
    map_ = nullptr;
    throw;
  }
  for (size_t i = 0; i < header_.tensors.size(); ++i) index_[header_.tensors[i].name] = i;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      header_(std::move(other.header_)),
      index_(std::move(other.index_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    if (map_) ::munmap(map_, size_);
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    size_ = std::exchange(other.size_, 0);
    header_ = std::move(other.header_);
    index_ = std::move(other.index_);
  }
  return *this;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &header_.tensors[it->second];
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  if (const TensorInfo* t = find(name)) return *t;
  std::vector<std::string> names;
  for (const auto& t : header_.tensors) names.push_back(t.name);
  std::string msg = path_ + ": no tensor named '" + name + "'";
  std::string guess = str::closest(name, names);
  if (!guess.empty())
    msg += "; did you mean '" + guess + "'?";
  else
    msg += " (the file has " + std::to_string(names.size()) + " tensors; check the checkpoint matches the model)";
  throw InputError(msg);
}

const uint8_t* SafetensorsFile::data(const TensorInfo& t) const { return map_ + header_.data_start + t.begin; }

}  // namespace hpcrl::io
