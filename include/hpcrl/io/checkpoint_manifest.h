// manifest.json of a checkpoint step directory: the size and CRC-32C of every
// file the step holds (state.json, each role's config.json and safetensors,
// every rank's optimizer file), written last, when all of them are complete.
// On --resume each file is checked against it before anything is loaded, so
// flipped bytes, a truncated shard or a missing optimizer file is an error that
// names the file — never weights that load and silently differ.
//
//   {"format": "hpcrl-checkpoint-manifest", "version": 1,
//    "files": [{"path": "policy/model.safetensors", "bytes": 4096, "crc32c": "e3069283"}, ...]}
//
// Torch-free, like every parser of files a user or a file system hands hpcrl.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hpcrl::io {

inline constexpr const char* kManifestFile = "manifest.json";

struct ManifestEntry {
  std::string path;  // relative to the step directory, '/'-separated, no '..'
  uint64_t bytes = 0;
  uint32_t crc32c = 0;
};
using Manifest = std::vector<ManifestEntry>;

std::string format_manifest(const Manifest& manifest);

// InputError starting with `where` on anything but a manifest format_manifest
// could have written (wrong types, a path leaving the directory, a path listed
// twice, a checksum that is not 8 hex digits).
Manifest parse_manifest(std::string_view text, const std::string& where);

// Every regular file under `dir` (relative paths, sorted), manifest.json excluded.
std::vector<std::string> checkpoint_files(const std::string& dir);

// One file measured against its entry.
struct FileCheck {
  enum Kind : int64_t { kIntact = 0, kMissing = 1, kSizeDiffers = 2, kChecksumDiffers = 3 };
  Kind kind = kIntact;
  uint64_t bytes = 0;    // found (kSizeDiffers, kChecksumDiffers)
  uint32_t crc32c = 0;   // found (kChecksumDiffers)
};
FileCheck check_file(const std::string& dir, const ManifestEntry& entry);

// "DIR/PATH is truncated: 1000 of 4096 bytes" and the like; "" for an intact file.
std::string describe(const std::string& dir, const ManifestEntry& entry, const FileCheck& check);

}  // namespace hpcrl::io
