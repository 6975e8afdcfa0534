// The run directory's lock (see run_lock.h).
#include "hpcrl/runner/run_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <sstream>
#include <utility>

#include "hpcrl/util/error.h"
#include "hpcrl/util/log.h"

namespace hpcrl::runner {
namespace {

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string read_all(int fd) {
  std::string text;
  char buf[512];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(n));
  return text;
}

void write_holder(int fd, const std::string& path) {
  const std::string text = format_lock_holder(this_process_holder());
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()))
    throw RuntimeError("cannot write the run lock " + path + ": " + std::strerror(errno));
  ::fsync(fd);
}

// Whether a lock that flock() granted may be taken; throws when another host's job
// may still hold it.
void check_granted_lock(const LockHolder& old, const std::string& path, const std::string& run_dir) {
  const LockHolder me = this_process_holder();
  if (old.host == me.host) {
    spdlog::warn("{} was left by {}, which is no longer running; taking it", path, old.describe());
    return;
  }
  if (!me.job.empty() && old.job == me.job) {
    spdlog::info("{} was held by this Slurm job ({}) before it was requeued; taking it", path, old.describe());
    return;
  }
  throw InputError("run directory " + run_dir + " is locked by " + old.describe() + " (" + path +
                   "); a lock from another host cannot be checked from here. If that job has ended, delete " + path +
                   " and run again; otherwise wait for it, or use another --out DIR");
}
}  // namespace

std::string LockHolder::describe() const {
  std::string s = "pid " + std::to_string(pid) + " on host " + host;
  if (!job.empty()) s += " (Slurm job " + job + ")";
  if (!since.empty()) s += " since " + since;
  return s;
}

LockHolder parse_lock_holder(const std::string& text) {
  LockHolder h;
  std::istringstream in(text);
  std::string key, value;
  bool any = false;
  while (in >> key) {
    if (!std::getline(in >> std::ws, value)) value.clear();
    any = true;
    if (key == "host") h.host = value;
    else if (key == "pid") h.pid = std::strtol(value.c_str(), nullptr, 10);
    else if (key == "job") h.job = value;
    else if (key == "since") h.since = value;
  }
  if (any && h.host.empty()) h.host = "unknown";
  return h;
}

std::string format_lock_holder(const LockHolder& h) {
  std::string s = "host " + h.host + "\npid " + std::to_string(h.pid) + "\n";
  if (!h.job.empty()) s += "job " + h.job + "\n";
  return s + "since " + h.since + "\n";
}

LockHolder this_process_holder() {
  LockHolder h;
  h.host = host_name();
  h.pid = static_cast<long>(::getpid());
  if (const char* job = std::getenv("SLURM_JOB_ID"); job && *job) h.job = job;
  h.since = utc_now();
  return h;
}

RunLock RunLock::acquire(const std::string& path, const std::string& run_dir) {
  // O_CLOEXEC: a reward program or tool hpcrl starts must not inherit (and keep) the lock.
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    throw InputError("cannot open the run lock " + path + ": " + std::strerror(errno) +
                     "; check that the run directory is writable");
  RunLock lock(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const LockHolder old = parse_lock_holder(read_all(fd));
    if (err == EWOULDBLOCK)
      throw InputError("run directory " + run_dir + " is in use by another job: " +
                       (old.host.empty() ? std::string("its holder has not written its name yet") : old.describe()) +
                       " (" + path + "); wait for it to end, or use another --out DIR");
    throw InputError("cannot lock " + path + ": " + std::strerror(err) +
                     "; the file system may not support flock (docs/reliability.md)");
  }
  const LockHolder old = parse_lock_holder(read_all(fd));
  if (!old.host.empty()) check_granted_lock(old, path, run_dir);
  write_holder(fd, path);
  return lock;
}

RunLock::RunLock(RunLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

RunLock& RunLock::operator=(RunLock&& other) noexcept {
  if (this != &other) {
    this->~RunLock();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

RunLock::~RunLock() {
  if (fd_ < 0) return;
  if (::ftruncate(fd_, 0) == 0) ::fsync(fd_);  // released: the next job on any host takes it
  ::close(fd_);                                 // drops the flock
  fd_ = -1;
}

}  // namespace hpcrl::runner
