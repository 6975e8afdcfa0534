// Children a program left behind outside its process group (see orphans.h).
#include "reward/orphans.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>

namespace hpcrl::reward {
namespace {
std::mutex g_mutex;
std::set<pid_t> g_leaders;
std::set<pid_t> g_before;  // children this process had before it adopted orphans (e.g. MPI's own daemon)

// The parent pid in /proc/PID/stat (the field after the state, past the name's ')').
pid_t parent_of(const std::string& pid) {
  std::ifstream stat("/proc/" + pid + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return -1;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 4 >= line.size()) return -1;
  return static_cast<pid_t>(std::atol(line.c_str() + close + 4));  // ") S PPID"
}
}  // namespace

namespace {
// Direct children of this process, by /proc.
std::vector<pid_t> children() {
  const pid_t self = ::getpid();
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (parent_of(name) == self) out.push_back(static_cast<pid_t>(std::atol(name.c_str())));
  }
  return out;
}
}  // namespace

void adopt_orphans() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::vector<pid_t> existing = children();
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_before.insert(existing.begin(), existing.end());
    }
    ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  });
}

void register_leader(pid_t pid) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_leaders.insert(pid);
}

int spawn_leader(pid_t* pid, const std::function<int(pid_t*)>& spawn) {
  std::lock_guard<std::mutex> lock(g_mutex);  // orphaned_children() checks a listed child under it
  const int rc = spawn(pid);
  if (rc == 0) g_leaders.insert(*pid);
  return rc;
}

void unregister_leader(pid_t pid) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_leaders.erase(pid);
}

std::vector<pid_t> orphaned_children() {
  std::vector<pid_t> out;
  for (pid_t pid : children()) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_leaders.count(pid) && !g_before.count(pid)) out.push_back(pid);
  }
  return out;
}

size_t end_orphans() {
  const std::vector<pid_t> orphans = orphaned_children();
  for (pid_t pid : orphans) {
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  return orphans.size();
}

}  // namespace hpcrl::reward
