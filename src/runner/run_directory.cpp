// Run-directory creation with the "never overwrite, never half-write" rules (see run_directory.h).
#include "hpcrl/runner/run_directory.h"

#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "hpcrl/util/error.h"
#include "hpcrl/util/fs.h"
#include "runner/run_root_checks.h"

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

void RunDirectory::check(const std::string& root_str, RunDirMode mode, const std::vector<std::string>& inputs) {
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
  if (exists) check_not_working_directory(root_str);
  if (exists && !stdfs::is_empty(root, ec) && mode != RunDirMode::kForce)
    throw InputError("run directory " + root_str +
                     " already exists; pass --resume to continue that run, --force to replace it, "
                     "or choose another with --out DIR or --set run.name=NAME");
  if (exists && !stdfs::is_empty(root, ec)) check_replaceable(root_str, inputs);
}

namespace {
// Renames the assembled `staging` into `root`, replacing what is there (already checked
// to be an hpcrl run, and locked). On failure the staging folder goes and root is untouched.
void swap_in(const stdfs::path& staging, const stdfs::path& root, bool exists) {
  std::error_code ec;
  try {
    if (!exists) {
      stdfs::rename(staging, root);
      return;
    }
    stdfs::path old = fs::temp_sibling(root.string() + ".replaced");
    stdfs::rename(root, old);
    stdfs::rename(staging, root);
    stdfs::remove_all(old, ec);
  } catch (const stdfs::filesystem_error& e) {
    stdfs::remove_all(staging, ec);
    throw InputError("cannot put the new run directory in place at " + root.string() + " (" + e.code().message() +
                     "); another job may have created it meanwhile. Check it, then run again or use another --out DIR");
  }
}
}  // namespace

RunDirectory RunDirectory::prepare(const std::string& root_str, RunDirMode mode, const std::vector<std::string>& inputs,
                                   const std::string& resolved_config, const StartCommand& command) {
  check(root_str, mode, inputs);
  stdfs::path root(root_str);
  std::error_code ec;
  if (mode == RunDirMode::kResume) {
    RunLock lock = RunLock::acquire((root / "run.lock").string(), root_str);
    make_layout(root);
    // Keep the original resolved config; the resumed run's own config goes beside it.
    fs::write_file_atomic((root / "config.resume.yaml").string(), resolved_config);
    return RunDirectory(root_str, true, std::move(lock));
  }
  const bool exists = stdfs::exists(root, ec);
  check_parent_writable(root);
  // A job that still writes the run being replaced holds its lock: refused before anything moves.
  RunLock replaced;
  if (exists && stdfs::exists(root / "run.lock", ec)) replaced = RunLock::acquire((root / "run.lock").string(), root_str);
  // Assemble beside the target, then swap it in.
  stdfs::path staging = fs::temp_sibling(root_str);
  RunLock lock;
  try {
    make_layout(staging);
    lock = RunLock::acquire((staging / "run.lock").string(), root_str);
    fs::write_file_atomic((staging / "config.resolved.yaml").string(), resolved_config);
    write_start_command(staging.string(), command);
  } catch (...) {
    stdfs::remove_all(staging, ec);
    throw;
  }
  swap_in(staging, root, exists);
  return RunDirectory(root_str, false, std::move(lock));
}

}  // namespace hpcrl::runner
