// Progress of a long loop on rank 0: step/total, rate, ETA. On a terminal it is
// one live line rewritten in place; otherwise (Slurm output files) a plain log
// line every `period_s` seconds, so files do not fill with carriage returns.
#pragma once

#include <chrono>
#include <string>

namespace hpcrl {

class Progress {
 public:
  // `enabled` is false on ranks other than 0. `unit` names what a step is ("step", "seq").
  Progress(std::string label, long total, bool enabled, std::string unit = "step", double period_s = 10.0);
  ~Progress();

  // Marks `done` steps complete; `extra` is appended (e.g. "loss 1.23").
  void update(long done, const std::string& extra = "");
  void finish(const std::string& extra = "");

  // Formats seconds as "1h02m", "3m05s" or "12.3s".
  static std::string format_duration(double seconds);

 private:
  std::string line(long done, const std::string& extra) const;

  std::string label_, unit_;
  long total_;
  bool enabled_, tty_, finished_ = false;
  double period_s_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

}  // namespace hpcrl
