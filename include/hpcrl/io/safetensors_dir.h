// A checkpoint on disk as one name → tensor lookup, whatever its layout: a
// directory with model.safetensors, a directory with
// model.safetensors.index.json + shards, or a path straight to a .safetensors or
// .index.json file. Every file is mapped and validated when the checkpoint is
// opened, and the index is checked against the shards (each listed tensor must
// be in the shard the index names), so a broken checkpoint fails before any
// model is built. Torch-free; io/tensor_store.h adds at::Tensor loading.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hpcrl/io/safetensors.h"

namespace hpcrl::io {

class SafetensorsDir {
 public:
  explicit SafetensorsDir(const std::string& path);  // InputError when nothing loadable is there

  // The directory, and the file the tensors were listed from (model.safetensors or the index).
  const std::string& dir() const { return dir_; }
  const std::string& source() const { return source_; }

  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return where_.count(name) > 0; }
  // InputError naming the checkpoint and the closest existing name when absent.
  const TensorInfo& info(const std::string& name) const;
  const SafetensorsFile& file_of(const std::string& name) const;
  const uint8_t* data(const std::string& name) const;  // first byte of the tensor in its mapping

  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  void open_single(const std::string& file);
  void open_index(const std::string& index_file);

  std::string dir_;
  std::string source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<const SafetensorsFile*, const TensorInfo*>> where_;
};

}  // namespace hpcrl::io
