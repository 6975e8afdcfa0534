// Child process with piped stdin/stdout/stderr (see subprocess.h for why it is
// spawned, grouped and reaped the way it is).
#include "reward/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include "hpcrl/util/check.h"
#include "reward/orphans.h"

extern char** environ;

namespace hpcrl::reward {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// A pipe whose ends are close-on-exec (so other children do not inherit them)
// and above 2 (so dup2 onto 0/1/2 in the child is never a no-op that keeps CLOEXEC).
void make_pipe(int fds[2]) {
  HPCRL_CHECK(::pipe2(fds, O_CLOEXEC) == 0, "pipe2: " << std::strerror(errno));
  for (int i = 0; i < 2; ++i) {
    if (fds[i] > 2) continue;
    int high = ::fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
    HPCRL_CHECK(high >= 0, "fcntl(F_DUPFD_CLOEXEC): " << std::strerror(errno));
    ::close(fds[i]);
    fds[i] = high;
  }
}

void set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  HPCRL_CHECK(flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, "fcntl(O_NONBLOCK): " << std::strerror(errno));
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  return "stopped (wait status " + std::to_string(status) + ")";
}

}  // namespace

Subprocess::Subprocess(const std::vector<std::string>& argv, const std::string& what) {
  HPCRL_CHECK(!argv.empty() && !argv[0].empty(), what << ": empty argv");
  int in[2], out[2], err[2];
  make_pipe(in);
  make_pipe(out);
  make_pipe(err);

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGALRM})
    sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  adopt_orphans();
  const int rc = spawn_leader(&pid_, [&](pid_t* pid) {
    return ::posix_spawnp(pid, argv[0].c_str(), &fa, &attr, cargv.data(), environ);
  });
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    pid_ = -1;
    bool has_slash = argv[0].find('/') != std::string::npos;
    std::string why = rc == ENOENT ? (has_slash ? "no such file" : "not found on PATH")
                      : rc == EACCES ? "permission denied (not executable?)"
                                     : std::strerror(rc);
    throw InputError(what + ": cannot start '" + argv[0] + "': " + why +
                     "; fix: give an existing executable (a full path, or a program on PATH such as python3), "
                     "or the command as one string to run it with sh -c");
  }
  in_ = in[1];
  out_ = out[0];
  err_ = err[0];
  set_nonblocking(in_);
  set_nonblocking(out_);
  set_nonblocking(err_);
}

Subprocess::~Subprocess() {
  try {
    stop(3.0);
  } catch (...) {
    // A destructor must not throw; stop() only throws on impossible waitpid states.
  }
}

void Subprocess::close_stdin() { close_fd(in_); }
void Subprocess::close_stdout() { close_fd(out_); }
void Subprocess::close_stderr() { close_fd(err_); }

std::optional<std::string> Subprocess::wait_exit(double seconds) {
  if (exit_ || pid_ <= 0) return exit_;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) return exit_ = describe_status(status);
    if (r < 0 && errno == ECHILD) return exit_ = std::string("has exited (status unknown: reaped elsewhere)");
    if (r < 0 && errno != EINTR) HPCRL_CHECK(false, "waitpid(" << pid_ << "): " << std::strerror(errno));
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Subprocess::stop(double grace_s) {
  // Our read ends go too: a child blocked writing to a full pipe then gets
  // EPIPE instead of never seeing its EOF.
  close_stdin();
  close_stdout();
  close_stderr();
  if (pid_ <= 0 || group_killed_) return;
  if (!exit_ && !wait_exit(grace_s)) {
    ::kill(-pid_, SIGTERM);
    if (!wait_exit(2.0)) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      exit_ = describe_status(status);
    }
  }
  // The leader is gone, but what it started in the background (`sh -c 'judge &
  // …'`) is still in its process group and would outlive hpcrl, re-parented to
  // init. Linux does not hand out a pid that is still a live group's id, so
  // while a member lives the signal reaches only this group; once.
  ::kill(-pid_, SIGKILL);
  group_killed_ = true;
  unregister_leader(pid_);
  // What it started in a session of its own (setsid) left the group; re-parented here, it ends too.
  if (const size_t n = end_orphans(); n > 0)
    spdlog::debug("program {}: ended {} process(es) it left running outside its process group", pid_, n);
}

void StderrTail::append(const char* data, size_t n) {
  partial_.append(data, n);
  size_t start = 0;
  for (size_t nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n', start)) {
    std::string line = partial_.substr(start, nl - start);
    start = nl + 1;
    spdlog::debug("{}{}", prefix_, line);
    if (line.size() > max_bytes_) line = "..." + line.substr(line.size() - max_bytes_);
    lines_.push_back(std::move(line));
  }
  partial_.erase(0, start);
  if (partial_.size() > max_bytes_) partial_ = "..." + partial_.substr(partial_.size() - max_bytes_);
  size_t bytes = partial_.size();
  for (const auto& l : lines_) bytes += l.size() + 1;
  while (!lines_.empty() && (lines_.size() > max_lines_ || bytes > max_bytes_)) {
    bytes -= lines_.front().size() + 1;
    lines_.erase(lines_.begin());
  }
}

std::string StderrTail::text() const {
  std::string out;
  for (const auto& l : lines_) out += l + "\n";
  out += partial_;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool pump_stderr(Subprocess& p, StderrTail& tail) {
  char buf[4096];
  while (p.stderr_fd() >= 0) {
    ssize_t n = ::read(p.stderr_fd(), buf, sizeof buf);
    if (n > 0) {
      tail.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    p.close_stderr();  // EOF, or an error that makes the pipe useless
    return false;
  }
  return false;
}

}  // namespace hpcrl::reward
