// A child process hpcrl talks to through pipes: the transport under the
// `command` reward (command_reward.h). It owns the process and its three pipe
// ends and nothing else — the line exchange and timeouts live in
// line_exchange.cpp, the protocol and messages in command_reward.cpp.
//
// Why these choices:
// - posix_spawnp, not fork: the trainer process may hold tens of GiB and
//   registered (MPI/NCCL) memory; glibc's posix_spawn is vfork-like, so no page
//   tables are copied and nothing runs between clone and exec.
// - The child gets its own process group, so `sh -c "..."` and whatever it
//   starts are stopped together, and a Ctrl-C meant for hpcrl's own stop
//   handling does not kill the scorer mid-batch.
// - Default signal dispositions and an empty signal mask in the child: hpcrl
//   (or MPI) may ignore or block signals, which exec would otherwise inherit.
// - Pipes are non-blocking on hpcrl's side; the caller multiplexes them with poll().
// - The destructor always reaps: close stdin (a well-behaved program exits on
//   EOF) and wait 3 s, then SIGTERM (2 s) and SIGKILL to the group, then
//   waitpid. No zombies.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace hpcrl::reward {

class Subprocess {
 public:
  // Starts argv[0] (looked up on PATH when it has no '/') with stdin, stdout
  // and stderr connected to pipes. InputError when it cannot be started
  // (no such program, not executable), naming `what` and the program.
  Subprocess(const std::vector<std::string>& argv, const std::string& what);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exit_; }  // not yet reaped
  int stdin_fd() const { return in_; }    // -1 once closed
  int stdout_fd() const { return out_; }  // -1 once closed
  int stderr_fd() const { return err_; }  // -1 once closed
  void close_stdin();
  void close_stdout();
  void close_stderr();

  // Reaps the child if it has exited (non-blocking), waiting at most `seconds`.
  // Returns how it ended ("exited with status 3", "was killed by signal 9
  // (Killed)"), or nullopt while it is still running.
  std::optional<std::string> wait_exit(double seconds);

  // Closes all pipes, waits up to `grace_s` for the child to exit, then SIGTERM,
  // then SIGKILL to its process group; always reaps. Idempotent.
  void stop(double grace_s);

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::optional<std::string> exit_;  // set once reaped
  bool group_killed_ = false;        // stop() has ended the whole process group
};

// The last bytes a child wrote to stderr, for error messages: keeps at most
// `max_lines` lines / `max_bytes` bytes; complete lines are also passed to
// spdlog::debug so `--log-level debug` shows the program's output live.
class StderrTail {
 public:
  explicit StderrTail(std::string prefix, size_t max_lines = 20, size_t max_bytes = 4096)
      : prefix_(std::move(prefix)), max_lines_(max_lines), max_bytes_(max_bytes) {}
  void append(const char* data, size_t n);
  // The kept lines (and an unterminated last line), "" when the child wrote nothing.
  std::string text() const;

 private:
  std::string prefix_;
  size_t max_lines_, max_bytes_;
  std::vector<std::string> lines_;
  std::string partial_;
};

// Reads what is available on the non-blocking fd into `tail`; closes the
// stderr pipe on EOF. Returns false on EOF.
bool pump_stderr(Subprocess& p, StderrTail& tail);

}  // namespace hpcrl::reward
