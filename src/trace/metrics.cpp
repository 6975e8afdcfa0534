// metrics.jsonl writer (metrics.h). Lines are built with nlohmann's
// ordered_json so the fixed keys come first in docs/tracing.md's order, then the
// metrics in the order the stage reported them; each goes out in one
// O_APPEND write, which is what makes a line either fully there or not at all.
#include "hpcrl/trace/metrics.h"

#include "hpcrl/trace/tensorboard.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hpcrl/util/check.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::trace {

MetricsWriter::MetricsWriter(std::string path, int rank) : path_(std::move(path)) {
  samples_path_ = (std::filesystem::path(path_).parent_path() / "eval_samples.jsonl").string();
  if (rank == 0) open_append();
}

namespace {
// Appends `text` to `path` in one write (created when missing).
void append_to(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw RuntimeError("cannot open " + path + " for appending: " + std::strerror(errno));
  ssize_t n;
  do {
    n = ::write(fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) throw RuntimeError("cannot append to " + path + " (disk full?)");
}

// The lines of a JSONL file at `path` up to (stage_index, step) by its `stage_key`/"step" fields.
std::string lines_up_to(const std::string& path, const char* stage_key, int stage_index, int64_t step) {
  std::string kept, line;
  std::ifstream in(path);
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains(stage_key) || !j[stage_key].is_number_integer() ||
        !j.contains("step") || !j["step"].is_number_integer())
      continue;  // a line cut off by a crash
    const int si = j[stage_key].get<int>();
    const int64_t st = j["step"].get<int64_t>();
    if (si < stage_index || (si == stage_index && st <= step)) kept += line + "\n";
  }
  return kept;
}
}  // namespace

void MetricsWriter::write_samples(const std::string& stage, int stage_index, int64_t step,
                                  const std::vector<SampleLine>& samples) {
  if (fd_ < 0 || samples.empty()) return;
  std::string text;
  for (const auto& s : samples) {
    nlohmann::ordered_json line;
    line["stage"] = stage_index;
    line["kind"] = stage;
    line["step"] = step;
    line["prompt"] = s.prompt;
    line["response"] = s.response;
    line["answer"] = s.answer;
    line["reward"] = s.reward;
    text += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  append_to(samples_path_, text);
}

MetricsWriter::~MetricsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsWriter::open_append() {
  std::filesystem::path p(path_);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw RuntimeError("cannot open " + path_ + " for appending: " + std::strerror(errno) +
                       " (check that the run directory is writable)");
}

void MetricsWriter::mirror_to_tensorboard(const std::string& root) {
  if (fd_ < 0) return;
  std::error_code ec;
  std::filesystem::create_directories(root, ec);
  if (ec || !std::filesystem::is_directory(root))
    throw RuntimeError("cannot create TensorBoard directory " + root + ": " +
                       (ec ? ec.message() : std::string("not a directory")) +
                       " (give a path that is, or can be created as, a writable directory)");
  tensorboard_root_ = root;
}

TensorBoardWriter& MetricsWriter::tensorboard_of(const std::string& stage, int stage_index) {
  auto it = tensorboard_.find(stage_index);
  if (it != tensorboard_.end()) return *it->second;
  char run[64];
  std::snprintf(run, sizeof run, "%02d-", stage_index);
  auto restart = restart_step_.find(stage_index);
  const int64_t first_step = restart == restart_step_.end() ? 0 : restart->second;
  auto writer = std::make_unique<TensorBoardWriter>(tensorboard_root_ + "/" + run + stage, 0, first_step);
  return *tensorboard_.emplace(stage_index, std::move(writer)).first->second;
}

void MetricsWriter::write(const std::string& stage, int stage_index, int64_t step, const Metrics& metrics) {
  if (fd_ < 0) return;
  nlohmann::ordered_json line;
  line["stage"] = stage;
  line["stage_index"] = stage_index;
  line["step"] = step;
  line["time"] = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& [key, value] : metrics) {
    HPCRL_CHECK(!line.contains(key), "metric \"" << key << "\" repeats a key of the " << stage << " step " << step
                                                 << " line; give each metric a distinct name");
    line[key] = value;  // NaN/inf are dumped as null
  }
  std::string text = line.dump() + "\n";
  ssize_t n;
  do {
    n = ::write(fd_, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(text.size()))
    throw RuntimeError("cannot append to " + path_ + ": " + (n < 0 ? std::strerror(errno) : "short write") +
                       " (disk full?)");
  if (!tensorboard_root_.empty()) tensorboard_of(stage, stage_index).write(stage, step, metrics);
}

void MetricsWriter::truncate_after(int stage_index, int64_t step) {
  if (fd_ < 0) return;
  std::string text = fs::read_file(path_, "metrics file");
  std::string kept;
  size_t begin = 0;
  for (int line_no = 1; begin < text.size(); ++line_no) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) break;  // a line cut off by a crash: dropped
    std::string line = text.substr(begin, end - begin);
    begin = end + 1;
    if (str::trim(line).empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    std::string where = path_ + ":" + std::to_string(line_no);
    HPCRL_CHECK_INPUT(!j.is_discarded() && j.is_object(),
                      where << ": not a JSON object; metrics.jsonl holds one object per line (fix or remove the line)");
    HPCRL_CHECK_INPUT(j.contains("stage_index") && j["stage_index"].is_number_integer() && j.contains("step") &&
                          j["step"].is_number_integer(),
                      where << ": metrics line without integer \"stage_index\" and \"step\" (fix or remove the line)");
    int si = j["stage_index"].get<int>();
    int64_t st = j["step"].get<int64_t>();
    if (si < stage_index || (si == stage_index && st <= step)) kept += line + "\n";
  }
  ::close(fd_);
  fd_ = -1;
  fs::write_file_atomic(path_, kept);
  if (std::filesystem::exists(samples_path_))
    fs::write_file_atomic(samples_path_, lines_up_to(samples_path_, "stage", stage_index, step));
  open_append();
  restart_step_[stage_index] = step + 1;  // the first step this job writes again
  for (auto it = tensorboard_.lower_bound(stage_index); it != tensorboard_.end();)
    it = tensorboard_.erase(it);  // their next line opens a file that starts with the restart
}

}  // namespace hpcrl::trace
