// Checkpoint manifests (see checkpoint_manifest.h).
#include "hpcrl/io/checkpoint_manifest.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "hpcrl/util/crc32c.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/json_errors.h"

namespace hpcrl::io {
namespace {
using nlohmann::json;
namespace stdfs = std::filesystem;

constexpr const char* kFormat = "hpcrl-checkpoint-manifest";
constexpr int64_t kVersion = 1;

std::string hex8(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw InputError(where + ": " + what +
                   "; the checkpoint's manifest is damaged: resume from another step directory or start over");
}

// A path inside the step directory: relative, no empty, '.' or '..' component.
bool contained(const std::string& path) {
  if (path.empty() || path.front() == '/' || path.find('\0') != std::string::npos) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

uint32_t parse_hex8(const json& v, const std::string& where) {
  if (!v.is_string() || v.get_ref<const std::string&>().size() != 8) bad(where, "\"crc32c\" must be 8 hex digits");
  uint32_t out = 0;
  for (char c : v.get_ref<const std::string&>()) {
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) bad(where, "\"crc32c\" must be 8 lower-case hex digits");
    out = (out << 4) | static_cast<uint32_t>(d);
  }
  return out;
}
}  // namespace

std::string format_manifest(const Manifest& manifest) {
  json files = json::array();
  for (const auto& e : manifest)
    files.push_back({{"path", e.path}, {"bytes", e.bytes}, {"crc32c", hex8(e.crc32c)}});
  return json{{"format", kFormat}, {"version", kVersion}, {"files", files}}.dump(1);
}

Manifest parse_manifest(std::string_view text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    bad(where + ":" + json_errors::line_col(text, json_errors::offset(e, text)),
        "not valid JSON (" + json_errors::problem(e) + ")");
  }
  if (!j.is_object() || j.value("format", json()) != kFormat)
    bad(where, std::string("not an hpcrl checkpoint manifest (expected {\"format\": \"") + kFormat + "\", ...})");
  if (j.value("version", json()) != kVersion) bad(where, "unknown manifest version (this hpcrl reads version 1)");
  const json& files = j.value("files", json());
  if (!files.is_array()) bad(where, "\"files\" must be a list");
  Manifest out;
  std::set<std::string> seen;
  for (size_t i = 0; i < files.size(); ++i) {
    const json& f = files[i];
    const std::string at = where + ": files[" + std::to_string(i) + "]";
    if (!f.is_object() || f.size() != 3 || !f.contains("path") || !f.contains("bytes") || !f.contains("crc32c"))
      bad(at, "each entry must be {\"path\", \"bytes\", \"crc32c\"}");
    const json& path = f["path"];
    if (!path.is_string() || !contained(path.get<std::string>()))
      bad(at, "\"path\" must be a relative path inside the step directory");
    if (!f["bytes"].is_number_unsigned()) bad(at, "\"bytes\" must be a non-negative integer");
    ManifestEntry e{path.get<std::string>(), f["bytes"].get<uint64_t>(), parse_hex8(f["crc32c"], at)};
    if (!seen.insert(e.path).second) bad(at, "'" + e.path + "' is listed twice");
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> checkpoint_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : stdfs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::string rel = stdfs::relative(e.path(), dir).generic_string();
    if (rel != kManifestFile) out.push_back(rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

FileCheck check_file(const std::string& dir, const ManifestEntry& entry) {
  FileCheck c;
  const std::string path = dir + "/" + entry.path;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    c.kind = FileCheck::kMissing;
    return c;
  }
  if (static_cast<uint64_t>(st.st_size) != entry.bytes) {
    c.kind = FileCheck::kSizeDiffers;
    c.bytes = static_cast<uint64_t>(st.st_size);
    return c;
  }
  util::FileDigest d = util::file_digest(path);
  c.bytes = d.bytes;
  c.crc32c = d.crc32c;
  if (d.bytes != entry.bytes) c.kind = FileCheck::kSizeDiffers;  // changed while being read
  else if (d.crc32c != entry.crc32c) c.kind = FileCheck::kChecksumDiffers;
  return c;
}

std::string describe(const std::string& dir, const ManifestEntry& entry, const FileCheck& check) {
  const std::string file = dir + "/" + entry.path;
  switch (check.kind) {
    case FileCheck::kIntact: return "";
    case FileCheck::kMissing: return file + " is missing (or cannot be read)";
    case FileCheck::kSizeDiffers:
      if (check.bytes < entry.bytes)
        return file + " is truncated: " + std::to_string(check.bytes) + " of " + std::to_string(entry.bytes) + " bytes";
      return file + " has " + std::to_string(check.bytes) + " bytes, " + std::to_string(entry.bytes) +
             " were written";
    case FileCheck::kChecksumDiffers:
      return file + " does not match its checksum (crc32c " + hex8(check.crc32c) + ", written as " +
             hex8(entry.crc32c) + "): its bytes changed after the checkpoint was written";
  }
  return "";
}

}  // namespace hpcrl::io
