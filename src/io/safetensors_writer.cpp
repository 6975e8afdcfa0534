// Safetensors writing, single file and sharded (see io/safetensors_writer.h).
// Bytes are streamed to a temporary sibling file and renamed into place; the
// header is built first from names, dtypes and shapes alone, so no tensor has to
// be in host memory before its turn comes.
#include "hpcrl/io/safetensors_writer.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "hpcrl/io/safetensors_index.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"

namespace hpcrl::io {
namespace {

using ordered_json = nlohmann::ordered_json;
namespace stdfs = std::filesystem;

// The free bytes of the file system holding `path`, for error messages ("?" when unknown).
std::string free_bytes_near(const std::string& path) {
  struct statvfs st {};
  const std::string dir = stdfs::path(path).parent_path().string();
  if (::statvfs(dir.empty() ? "." : dir.c_str(), &st) != 0) return "?";
  return std::to_string(static_cast<unsigned long long>(st.f_bavail) * st.f_frsize);
}

// A file written under a temporary name and renamed on commit(); removed if
// commit() is never reached (an exception unwound past it). A failed write
// names the file, the bytes it needs and what the file system has free (a full
// disk, a quota or a file-size limit are the usual causes).
class AtomicFile {
 public:
  AtomicFile(const std::string& path, uint64_t size) : path_(path), tmp_(fs::temp_sibling(path)), size_(size) {
    stdfs::path p(path);
    if (p.has_parent_path()) stdfs::create_directories(p.parent_path());
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw RuntimeError("cannot write " + tmp_ + ": " + std::strerror(errno) +
                         " (check that the directory is writable and the disk is not full)");
  }
  ~AtomicFile() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(tmp_.c_str());
    }
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        fail(errno);
      }
      p += w;
      n -= static_cast<size_t>(w);
      written_ += static_cast<uint64_t>(w);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      int err = errno;
      fd_ = -1;
      ::unlink(tmp_.c_str());
      throw RuntimeError("cannot flush " + tmp_ + ": " + std::strerror(err));
    }
    fd_ = -1;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp_.c_str());
      throw RuntimeError("cannot rename " + tmp_ + " to " + path_ + ": " + std::strerror(err));
    }
  }

 private:
  [[noreturn]] void fail(int err) {
    // The partial file goes now: it would hold the space the message asks for.
    ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
    throw RuntimeError("cannot write " + path_ + ": " + std::strerror(err) + " after " + std::to_string(written_) +
                       " of the " + std::to_string(size_) + " bytes it needs (" + free_bytes_near(path_) +
                       " bytes free on its file system" +
                       (err == EFBIG ? "; a file-size limit (ulimit -f) stops it" : "") +
                       "): free space, raise the quota or limit, or write elsewhere");
  }

  std::string path_, tmp_;
  uint64_t size_;
  uint64_t written_ = 0;
  int fd_ = -1;
};

void validate(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    if (t.name.empty()) throw InputError(path + ": a tensor has an empty name; every tensor needs a name");
    if (t.name == "__metadata__")
      throw InputError(path + ": '__metadata__' is reserved by the format and cannot name a tensor");
    if (!seen.insert(t.name).second)
      throw InputError(path + ": tensor '" + t.name + "' is given twice; tensor names must be unique");
    for (int64_t d : t.shape)
      if (d < 0) throw InputError(path + ": tensor '" + t.name + "' has a negative dimension " + std::to_string(d));
    HPCRL_CHECK(t.write_bytes, "tensor '" << t.name << "' has no byte source");
  }
}

// HF's order: larger elements first so each tensor starts aligned to its element
// size (the header is padded to 8), then by name.
std::vector<const TensorToWrite*> file_order(const std::vector<TensorToWrite>& tensors) {
  std::vector<const TensorToWrite*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    size_t sa = dtype_size(a->dtype), sb = dtype_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });
  return order;
}

std::string build_header(const std::string& path, const std::vector<const TensorToWrite*>& order,
                         const std::map<std::string, std::string>& metadata) {
  ordered_json header = ordered_json::object();
  if (!metadata.empty()) {
    ordered_json m = ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const TensorToWrite* t : order) {
    uint64_t n = t->nbytes();
    header[t->name] = {{"dtype", dtype_name(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": cannot write the header: " + e.what() + " (tensor names and metadata must be UTF-8)");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

uint64_t TensorToWrite::nbytes() const {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

TensorToWrite tensor_from_bytes(std::string name, Dtype dtype, std::vector<int64_t> shape, const void* data) {
  TensorToWrite t{std::move(name), dtype, std::move(shape), nullptr};
  uint64_t n = t.nbytes();
  t.write_bytes = [data, n](const ByteSink& sink) { sink(data, n); };
  return t;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  validate(path, tensors);
  auto order = file_order(tensors);
  std::string header = build_header(path, order, metadata);

  uint64_t size = 8 + header.size();
  for (const TensorToWrite* t : order) size += t->nbytes();
  AtomicFile out(path, size);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  out.write(len, 8);
  out.write(header.data(), header.size());
  for (const TensorToWrite* t : order) {
    uint64_t written = 0;
    t->write_bytes([&](const void* data, size_t n) {
      out.write(data, n);
      written += n;
    });
    HPCRL_CHECK(written == t->nbytes(), "tensor '" << t->name << "' produced " << written << " bytes, its shape and "
                                                   << dtype_name(t->dtype) << " need " << t->nbytes());
  }
  out.commit();
}

std::vector<std::string> write_safetensors_sharded(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                                                   const std::map<std::string, std::string>& metadata,
                                                   uint64_t max_shard_bytes) {
  HPCRL_CHECK(max_shard_bytes > 0, "max_shard_bytes must be positive");
  validate(dir, tensors);
  // Fill shards in the caller's order, as huggingface_hub's splitter does.
  std::vector<std::vector<TensorToWrite>> shards;
  std::vector<TensorToWrite> current;
  uint64_t current_bytes = 0;
  for (const auto& t : tensors) {
    uint64_t n = t.nbytes();
    if (n > max_shard_bytes) {  // too big for any shard: a shard of its own
      shards.push_back({t});
      continue;
    }
    if (!current.empty() && current_bytes + n > max_shard_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(t);
    current_bytes += n;
  }
  if (!current.empty() || shards.empty()) shards.push_back(std::move(current));

  std::vector<std::string> written;
  if (shards.size() == 1) {
    write_safetensors((stdfs::path(dir) / kSingleFileName).string(), shards[0], metadata);
    written.push_back(kSingleFileName);
  } else {
    ShardIndex index;
    int count = static_cast<int>(shards.size());
    for (int i = 0; i < count; ++i) {
      std::string name = shard_file_name(i + 1, count);
      write_safetensors((stdfs::path(dir) / name).string(), shards[i], metadata);
      for (const auto& t : shards[i]) {
        index.weight_map[t.name] = name;
        index.total_size += t.nbytes();
      }
      written.push_back(name);
    }
    write_shard_index((stdfs::path(dir) / kIndexFileName).string(), index);
    written.push_back(kIndexFileName);
  }

  // Only now that the new checkpoint is complete, drop what an earlier one left.
  static const std::regex kOurs(R"(model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?)");
  std::set<std::string> keep(written.begin(), written.end());
  for (const auto& e : stdfs::directory_iterator(dir)) {
    std::string f = e.path().filename().string();
    if (!keep.count(f) && std::regex_match(f, kOurs)) stdfs::remove(e.path());
  }
  return written;
}

}  // namespace hpcrl::io
