// Progress line (see progress.h).
#include "hpcrl/util/progress.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace hpcrl {

Progress::Progress(std::string label, long total, bool enabled, std::string unit, double period_s)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), enabled_(enabled),
      tty_(::isatty(STDERR_FILENO) == 1), period_s_(period_s),
      start_(std::chrono::steady_clock::now()), last_print_(start_) {}

Progress::~Progress() {
  if (enabled_ && tty_ && !finished_) std::fputs("\n", stderr);
}

std::string Progress::format_duration(double s) {
  char buf[32];
  // Beyond ~3 years (a run of 2^63 steps, a rate of ~0) the number says nothing.
  if (!std::isfinite(s) || s >= 1e8) return ">1000d";
  const long long t = static_cast<long long>(s);
  if (s >= 86400) std::snprintf(buf, sizeof buf, "%lldd%02lldh", t / 86400, t / 3600 % 24);
  else if (s >= 3600) std::snprintf(buf, sizeof buf, "%lldh%02lldm", t / 3600, t / 60 % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%lldm%02llds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

std::string Progress::line(long done, const std::string& extra) const {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = elapsed > 0 ? done / elapsed : 0.0;
  double eta = rate > 0 ? (total_ - done) / rate : 0.0;
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %ld/%ld (%3.0f%%) %.2f %s/s, elapsed %s, ETA %s", label_.c_str(), done,
                total_, total_ > 0 ? 100.0 * done / total_ : 100.0, rate, unit_.c_str(),
                format_duration(elapsed).c_str(), format_duration(eta).c_str());
  std::string out = buf;
  if (!extra.empty()) out += "  " + extra;
  return out;
}

void Progress::update(long done, const std::string& extra) {
  if (!enabled_) return;
  auto now = std::chrono::steady_clock::now();
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", line(done, extra).c_str());
    std::fflush(stderr);
    return;
  }
  if (std::chrono::duration<double>(now - last_print_).count() >= period_s_ && done < total_) {
    last_print_ = now;
    spdlog::info("{}", line(done, extra));
  }
}

void Progress::finish(const std::string& extra) {
  if (!enabled_ || finished_) return;
  finished_ = true;
  if (tty_) std::fprintf(stderr, "\r\033[K%s\n", line(total_, extra).c_str());
  else spdlog::info("{}", line(total_, extra));
}

}  // namespace hpcrl
