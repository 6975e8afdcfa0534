// Checkpoint manifests written and verified across the ranks (see checkpoint_integrity.h).
#include "hpcrl/algo/checkpoint/checkpoint_integrity.h"

#include <spdlog/spdlog.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "hpcrl/io/checkpoint_manifest.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/crc32c.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::algo {
namespace stdfs = std::filesystem;

namespace {

// Rank 0's `text` on every rank.
std::string broadcast_text(const dist::CommPtr& world, const std::string& text) {
  at::Tensor n = at::full({1}, static_cast<int64_t>(text.size()), at::kLong);
  world->broadcast(n, 0);
  const int64_t size = n.item<int64_t>();
  if (size == 0) return "";
  at::Tensor bytes = at::empty({size}, at::kByte);
  if (world->rank() == 0) std::memcpy(bytes.data_ptr<uint8_t>(), text.data(), text.size());
  world->broadcast(bytes, 0);
  return std::string(reinterpret_cast<const char*>(bytes.data_ptr<uint8_t>()), static_cast<size_t>(size));
}

// Per file of `manifest`, the check of the rank that owns it (file i: rank i mod world), on every rank.
std::vector<io::FileCheck> check_shared(const std::string& dir, const io::Manifest& manifest,
                                        const dist::CommPtr& world) {
  const int64_t n = static_cast<int64_t>(manifest.size());
  at::Tensor found = at::zeros({std::max<int64_t>(n, 1), 3}, at::kLong);
  auto f = found.accessor<int64_t, 2>();
  for (int64_t i = world->rank(); i < n; i += world->size()) {
    io::FileCheck c;
    try {
      c = io::check_file(dir, manifest[static_cast<size_t>(i)]);
    } catch (const std::exception&) {  // unreadable counts as missing; throwing here would strand the other ranks
      c.kind = io::FileCheck::kMissing;
    }
    f[i][0] = c.kind;
    f[i][1] = static_cast<int64_t>(c.bytes);
    f[i][2] = c.crc32c;
  }
  world->all_reduce(found, dist::ReduceOp::kSum);  // each row has one owner
  std::vector<io::FileCheck> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    out[i].kind = static_cast<io::FileCheck::Kind>(f[i][0]);
    out[i].bytes = static_cast<uint64_t>(f[i][1]);
    out[i].crc32c = static_cast<uint32_t>(f[i][2]);
  }
  return out;
}

// Whether `dir`'s state.json says the step was written with a manifest (steps from before
// manifests existed load unverified; a deleted manifest must not pass for one of those).
bool written_with_manifest(const std::string& dir) {
  try {
    const auto state = nlohmann::json::parse(fs::read_file(dir + "/state.json", "checkpoint state"), nullptr, false);
    return state.is_object() && state.contains("manifest");
  } catch (const std::exception&) {
    return false;  // an unreadable state.json is reported where it is read
  }
}

// What is wrong with step directory `dir` (empty: intact). `unverified` is set
// when it has no manifest to check against.
std::vector<std::string> step_problems(const std::string& dir, const dist::CommPtr& world, bool& unverified) {
  const std::string path = dir + "/" + io::kManifestFile;
  // Rank 0 reads; "-" = no manifest, "!" + message = unreadable, "+" + text otherwise.
  std::string shared;
  if (world->rank() == 0) {
    std::error_code ec;
    if (!stdfs::exists(path, ec)) {
      shared = written_with_manifest(dir) ? "!" + path + " is missing, but this step was written with one (its "
                                                    "state.json names it), so its files cannot be checked; restore "
                                                    "the file, or resume from another step"
                                          : "-";
    } else {
      try {
        shared = "+" + fs::read_file(path, "checkpoint manifest");
      } catch (const std::exception& e) {
        shared = std::string("!") + e.what();
      }
    }
  }
  shared = broadcast_text(world, shared);
  unverified = shared == "-";
  if (unverified) return {};
  if (shared[0] == '!') return {shared.substr(1)};
  io::Manifest manifest;
  try {
    manifest = io::parse_manifest(std::string_view(shared).substr(1), path);
  } catch (const InputError& e) {
    return {e.what()};
  }
  std::vector<std::string> problems;
  const auto checks = check_shared(dir, manifest, world);
  for (size_t i = 0; i < manifest.size(); ++i)
    if (checks[i].kind != io::FileCheck::kIntact) problems.push_back(io::describe(dir, manifest[i], checks[i]));
  return problems;
}

// Complete step directories of a stage, newest first (rank 0 lists, every rank gets the list).
std::vector<std::string> step_dirs_newest_first(const std::string& stage_dir, const dist::CommPtr& world) {
  std::string listing;
  std::error_code ec;
  if (world->rank() == 0 && stdfs::is_directory(stage_dir, ec)) {
    std::vector<std::string> names;
    for (const auto& e : stdfs::directory_iterator(stage_dir)) {
      const std::string n = e.path().filename().string();
      if (!e.is_directory() || n.rfind("step-", 0) != 0 || n.find('.') != std::string::npos) continue;
      if (stdfs::exists(e.path() / "state.json"))
        names.push_back(n);
      else  // a finished step always has one (it is written before the rename into place)
        spdlog::warn("{} has no state.json, so it is not a checkpoint that can be resumed from; skipping it",
                     e.path().string());
    }
    std::sort(names.rbegin(), names.rend());
    listing = str::join(names, "\n");
  }
  listing = broadcast_text(world, listing);
  std::vector<std::string> out;
  if (!listing.empty())
    for (const auto& n : str::split(listing, '\n')) out.push_back(stage_dir + "/" + n);
  return out;
}

// `base`, or `base-2`, `base-3`, ... : the first name nothing has.
std::string unused_name(const std::string& base) {
  std::error_code ec;
  std::string name = base;
  for (int i = 2; stdfs::exists(name, ec); ++i) name = base + "-" + std::to_string(i);
  return name;
}

}  // namespace

void write_checkpoint_manifest(const std::string& step_dir, const dist::CommPtr& world) {
  trace::ScopedSpan span("checkpoint/manifest");
  const std::string listing = broadcast_text(world, world->rank() == 0 ? str::join(io::checkpoint_files(step_dir), "\n") : "");
  io::Manifest manifest;
  for (const auto& p : str::split(listing, '\n'))
    if (!p.empty()) manifest.push_back({p, 0, 0});
  const int64_t n = static_cast<int64_t>(manifest.size());
  at::Tensor found = at::zeros({std::max<int64_t>(n, 1), 2}, at::kLong);
  auto f = found.accessor<int64_t, 2>();
  for (int64_t i = world->rank(); i < n; i += world->size()) {
    util::FileDigest d = util::file_digest(step_dir + "/" + manifest[static_cast<size_t>(i)].path);
    f[i][0] = static_cast<int64_t>(d.bytes);
    f[i][1] = d.crc32c;
  }
  world->all_reduce(found, dist::ReduceOp::kSum);
  if (world->rank() != 0) return;
  for (int64_t i = 0; i < n; ++i) {
    manifest[static_cast<size_t>(i)].bytes = static_cast<uint64_t>(f[i][0]);
    manifest[static_cast<size_t>(i)].crc32c = static_cast<uint32_t>(f[i][1]);
  }
  fs::write_file_atomic(step_dir + "/" + io::kManifestFile, io::format_manifest(manifest));
}

std::string resumable_checkpoint(const std::string& stage_dir, const dist::CommPtr& world) {
  trace::ScopedSpan span("checkpoint/verify");
  const auto candidates = step_dirs_newest_first(stage_dir, world);
  std::vector<std::string> damaged, first_problems;
  for (const auto& dir : candidates) {
    bool unverified = false;
    auto problems = step_problems(dir, world, unverified);
    if (problems.empty()) {
      if (unverified)
        spdlog::warn("{}: no {} (written before hpcrl recorded checksums): its files are not verified", dir,
                     io::kManifestFile);
      if (!damaged.empty() && world->rank() == 0) {
        for (const auto& d : damaged) stdfs::rename(d, unused_name(d + ".damaged"));
        spdlog::warn("resuming from {} instead; the damaged step directories were renamed *.damaged", dir);
      }
      world->barrier();
      return dir;
    }
    if (world->rank() == 0)
      spdlog::warn("checkpoint {} is damaged: {}", dir, str::join(problems, "; "));
    if (first_problems.empty()) first_problems = problems;
    damaged.push_back(dir);
  }
  if (damaged.empty()) return "";
  throw InputError("no intact checkpoint in " + stage_dir + ": " + str::join(first_problems, "; ") +
                   (damaged.size() > 1 ? " (and " + std::to_string(damaged.size() - 1) + " older step(s) damaged too)"
                                       : "") +
                   "; restore the files from a copy, or start the run over with --force instead of --resume");
}

}  // namespace hpcrl::algo
