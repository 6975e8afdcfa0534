// Run-directory creation with the "never overwrite, never half-write" rules (see run_directory.h).
#include "hpcrl/runner/run_directory.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"

namespace hpcrl::runner {
namespace stdfs = std::filesystem;

namespace {
void make_layout(const stdfs::path& dir) {
  for (const char* sub : {"trace", "logs", "checkpoints"}) stdfs::create_directories(dir / sub);
}

void check_parent_writable(const stdfs::path& root) {
  stdfs::path parent = root.has_parent_path() ? root.parent_path() : stdfs::path(".");
  std::error_code ec;
  stdfs::create_directories(parent, ec);
  if (ec || ::access(parent.c_str(), W_OK) != 0)
    throw InputError("cannot create run directory " + root.string() + ": " + parent.string() +
                     " is not writable" + (ec ? " (" + ec.message() + ")" : "") +
                     "; choose another location with --out DIR");
}
}  // namespace

void RunDirectory::check(const std::string& root_str, RunDirMode mode) {
  stdfs::path root(root_str);
  std::error_code ec;
  bool exists = stdfs::exists(root, ec);
  if (exists && !stdfs::is_directory(root, ec))
    throw InputError("run directory " + root_str + " exists and is not a directory; remove it or use --out DIR");
  if (mode == RunDirMode::kResume) {
    if (!exists || !stdfs::exists(root / "config.resolved.yaml"))
      throw InputError("--resume: no run to resume in " + root_str +
                       " (no config.resolved.yaml there); drop --resume to start a new run");
    return;
  }
  if (exists && !stdfs::is_empty(root, ec) && mode != RunDirMode::kForce)
    throw InputError("run directory " + root_str +
                     " already exists; pass --resume to continue that run, --force to replace it, "
                     "or choose another with --out DIR or --set run.name=NAME");
}

RunDirectory RunDirectory::prepare(const std::string& root_str, RunDirMode mode, const std::string& resolved_config,
                                   const StartCommand& command) {
  check(root_str, mode);
  stdfs::path root(root_str);
  std::error_code ec;
  if (mode == RunDirMode::kResume) {
    make_layout(root);
    // Keep the original resolved config; the resumed run's own config goes beside it.
    fs::write_file_atomic((root / "config.resume.yaml").string(), resolved_config);
    return RunDirectory(root_str, true);
  }
  const bool exists = stdfs::exists(root, ec);
  check_parent_writable(root);
  // Assemble beside the target, then swap it in.
  stdfs::path staging = fs::temp_sibling(root_str);
  make_layout(staging);
  fs::write_file_atomic((staging / "config.resolved.yaml").string(), resolved_config);
  write_start_command(staging.string(), command);
  if (exists) {
    stdfs::path old = fs::temp_sibling(root_str + ".replaced");
    stdfs::rename(root, old);
    stdfs::rename(staging, root);
    stdfs::remove_all(old, ec);
  } else {
    stdfs::rename(staging, root);
  }
  return RunDirectory(root_str, false);
}

}  // namespace hpcrl::runner
