// What a run directory may be (see run_directory.h): one spelling of its path, never the
// working directory or an ancestor of it, and --force replaces only hpcrl's own runs.
#include <filesystem>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "hpcrl/runner/run_directory.h"
#include "hpcrl/util/error.h"
#include "runner/run_root_checks.h"

namespace hpcrl::runner {
namespace stdfs = std::filesystem;

namespace {
// `path` resolved through every symlink that exists, absolute.
stdfs::path resolved(const stdfs::path& path) {
  std::error_code ec;
  stdfs::path p = stdfs::weakly_canonical(stdfs::absolute(path), ec);
  return ec ? stdfs::absolute(path).lexically_normal() : p;
}

// Whether `inner` is `outer` or lies below it (both resolved).
bool within(const stdfs::path& inner, const stdfs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}
}  // namespace

std::string normalize_run_root(const std::string& out) {
  if (out.empty())
    throw InputError("the run directory is empty (--out \"\" or run.out: \"\"); give a directory, e.g. --out runs/NAME");
  stdfs::path p = stdfs::path(out).lexically_normal();
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  if (p.empty()) p = ".";
  std::error_code ec;
  if (stdfs::is_symlink(stdfs::symlink_status(p, ec)) && !stdfs::exists(p, ec))
    throw InputError("run directory " + p.string() + " is a symlink to " + stdfs::read_symlink(p, ec).string() +
                     ", which does not exist; create the target directory or remove the link, or use another --out DIR");
  return p.string();
}

bool written_by_hpcrl(const std::string& name) {
  static const std::set<std::string> names{
      "config.resolved.yaml", "config.resume.yaml", "command.json", "metrics.jsonl", "run.lock", "trace", "logs",
      "checkpoints",          "tensorboard",        "report.html",  "eval_samples.jsonl"};
  return names.count(name) > 0 || name.find(".tmp-") != std::string::npos;  // fs::temp_sibling's leftovers
}

void check_not_working_directory(const std::string& root) {
  std::error_code ec;
  const stdfs::path cwd = stdfs::current_path(ec);
  if (ec) return;
  if (within(resolved(cwd), resolved(root)))
    throw InputError("run directory " + root + " is the working directory or holds it (" + cwd.string() +
                     "); a run directory is replaced as a whole, so choose one below it, e.g. --out runs/NAME");
}

void check_replaceable(const std::string& root, const std::vector<std::string>& inputs) {
  const stdfs::path dir(root);
  std::error_code ec;
  if (!stdfs::exists(dir / "config.resolved.yaml", ec))
    throw InputError("--force: " + root + " is not an hpcrl run directory (no config.resolved.yaml), so it is not "
                     "replaced; move its contents away or choose another --out DIR");
  for (const auto& entry : stdfs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!written_by_hpcrl(name))
      throw InputError("--force: " + root + " holds " + name + ", which hpcrl did not write, so it is not replaced; "
                       "move " + (dir / name).string() + " away or choose another --out DIR");
  }
  const stdfs::path target = resolved(dir);
  for (const auto& input : inputs)
    if (!input.empty() && within(resolved(input), target))
      throw InputError("--force: " + root + " holds " + input + ", which this run reads, so it is not replaced; "
                       "move the input out of the run directory or choose another --out DIR");
}

}  // namespace hpcrl::runner
