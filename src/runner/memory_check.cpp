// The plan's memory against what this node can give (see memory_check.h).
#include "hpcrl/runner/memory_check.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "hpcrl/distributed/plan.h"
#include "hpcrl/util/error.h"

namespace hpcrl::runner {
namespace {

// A "Key:   123 kB" line of a /proc file, in bytes.
std::optional<int64_t> proc_kib_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream fields(line.substr(key.size() + 1));
      int64_t kib = 0;
      if (fields >> kib) return kib * 1024;
    }
  return std::nullopt;
}

std::optional<int64_t> file_number(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    return std::stoll(word);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(int64_t(1) << 30));
  return buf;
}
}  // namespace

std::optional<int64_t> allocatable_bytes() {
  std::optional<int64_t> best = proc_kib_field("/proc/meminfo", "MemAvailable");
  auto take = [&](std::optional<int64_t> v) {
    if (v) best = best ? std::min(*best, *v) : *v;
  };
  const auto max = file_number("/sys/fs/cgroup/memory.max"), current = file_number("/sys/fs/cgroup/memory.current");
  if (max && current) take(std::max<int64_t>(0, *max - *current));
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const auto vm = proc_kib_field("/proc/self/status", "VmSize");
    take(std::max<int64_t>(0, int64_t(as.rlim_cur) - vm.value_or(0)));
  }
  return best;
}

std::string memory_refusal(int64_t needed, int64_t available, int ranks_here, const std::string& biggest_role) {
  if (needed <= available) return "";
  return "this run needs about " + gib(needed) + " on this node (hpcrl plan's peak for its " +
         std::to_string(ranks_here) + " rank(s) here; the largest transient part is " + biggest_role +
         "'s), but only " + gib(available) +
         " can be allocated (MemAvailable, the cgroup's memory.max and ulimit -v, whichever is least), and the plan "
         "does not count libraries or allocator caches, so it cannot fit. See `hpcrl plan PIPELINE --world N`: use "
         "a smaller micro_batch or rollout.max_batch, ZeRO, LoRA, bf16, more ranks on more nodes, or a smaller model; "
         "run.check_memory: false skips this check";
}

void check_memory_fits(const config::PipelineConfig& cfg, int world, int rank, int local_rank, int local_size) {
  if (!cfg.run.check_memory || cfg.run.device != config::Device::cpu) return;
  const auto available = allocatable_bytes();
  if (!available) return;
  const dist::Plan plan = dist::make_plan(cfg, world, std::max(1, local_size));
  const int first = rank - local_rank, last = first + local_size - 1;
  int64_t needed = 0;
  std::string biggest;
  int64_t biggest_transient = -1;
  for (const auto& group : dist::rank_memory(plan))
    for (int r : group.ranks)
      if (r >= first && r <= last) {
        needed += group.peak();
        if (group.transient > biggest_transient) biggest_transient = group.transient, biggest = group.transient_role;
      }
  const std::string refusal = memory_refusal(needed, *available, local_size, biggest.empty() ? "no role" : biggest);
  if (!refusal.empty()) throw InputError(refusal);
}

}  // namespace hpcrl::runner
