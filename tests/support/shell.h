// Running a shell command (usually the hpcrl binary, maybe under mpirun) from
// a CLI test and capturing what it prints together with its exit status.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace hpcrl::test {

struct ShellResult {
  int status = -1;  // exit code; -1 when the command was killed by a signal
  std::string out;  // what it wrote to stdout (append " 2>&1" to the command for stderr too)
};

inline ShellResult run_command(const std::string& cmd) {
  ShellResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  while (size_t k = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), k);
  const int raw = pclose(p);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

}  // namespace hpcrl::test
