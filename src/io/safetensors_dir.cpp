// Opening a checkpoint directory, single-file or sharded (see io/safetensors_dir.h).
#include "hpcrl/io/safetensors_dir.h"

#include <filesystem>
#include <map>

#include "hpcrl/io/safetensors_index.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::io {
namespace stdfs = std::filesystem;

SafetensorsDir::SafetensorsDir(const std::string& path) {
  std::error_code ec;
  if (stdfs::is_directory(path, ec)) {
    dir_ = path;
    stdfs::path single = stdfs::path(path) / kSingleFileName;
    stdfs::path index = stdfs::path(path) / kIndexFileName;
    if (stdfs::exists(single, ec)) {
      open_single(single.string());
    } else if (stdfs::exists(index, ec)) {
      open_index(index.string());
    } else {
      std::vector<std::string> found;
      for (const auto& e : stdfs::directory_iterator(path, ec))
        if (str::ends_with(e.path().filename().string(), ".safetensors")) found.push_back(e.path().filename().string());
      std::string msg = path + ": no " + kSingleFileName + " or " + kIndexFileName +
                        " here (give the directory of a HF checkpoint, or the path of a .safetensors file)";
      if (!found.empty()) msg += "; safetensors files present: " + str::join(found, ", ");
      throw InputError(msg);
    }
    return;
  }
  if (!stdfs::exists(path, ec)) throw InputError("checkpoint not found: " + path + " (check the path)");
  dir_ = stdfs::path(path).parent_path().string();
  if (dir_.empty()) dir_ = ".";
  if (str::ends_with(path, ".index.json"))
    open_index(path);
  else
    open_single(path);
}

void SafetensorsDir::open_single(const std::string& file) {
  source_ = file;
  files_.push_back(std::make_unique<SafetensorsFile>(file));
  const SafetensorsFile* f = files_.back().get();
  for (const TensorInfo& t : f->tensors()) where_[t.name] = {f, &t};
}

void SafetensorsDir::open_index(const std::string& index_file) {
  source_ = index_file;
  ShardIndex index = read_shard_index(index_file);
  std::map<std::string, const SafetensorsFile*> shards;
  for (const auto& [name, shard] : index.weight_map) {
    auto it = shards.find(shard);
    if (it == shards.end()) {
      std::string shard_path = (stdfs::path(dir_) / shard).string();
      std::error_code ec;
      if (!stdfs::exists(shard_path, ec))
        throw InputError(index_file + ": shard " + shard + " (holding tensor '" + name + "') not found in " + dir_ +
                         " (download or copy every shard the index lists)");
      files_.push_back(std::make_unique<SafetensorsFile>(shard_path));
      it = shards.emplace(shard, files_.back().get()).first;
    }
    const TensorInfo* t = it->second->find(name);
    if (!t)
      throw InputError(index_file + ": weight_map puts tensor '" + name + "' in " + shard + ", but " + shard +
                       " has no such tensor (the index does not match its shards: re-save the checkpoint)");
    where_[name] = {it->second, t};
  }
}

std::vector<std::string> SafetensorsDir::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, _] : where_) out.push_back(name);
  return out;
}

const TensorInfo& SafetensorsDir::info(const std::string& name) const {
  auto it = where_.find(name);
  if (it != where_.end()) return *it->second.second;
  std::string msg = source_ + ": no tensor named '" + name + "'";
  std::string guess = str::closest(name, names());
  if (!guess.empty())
    msg += "; did you mean '" + guess + "'?";
  else
    msg += " (the checkpoint has " + std::to_string(where_.size()) + " tensors; check it matches the model)";
  throw InputError(msg);
}

const SafetensorsFile& SafetensorsDir::file_of(const std::string& name) const {
  info(name);  // throws the helpful error when absent
  return *where_.at(name).first;
}

const uint8_t* SafetensorsDir::data(const std::string& name) const {
  const TensorInfo& t = info(name);
  return where_.at(name).first->data(t);
}

}  // namespace hpcrl::io
