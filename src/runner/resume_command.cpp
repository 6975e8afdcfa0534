// Resume commands and RUN/command.json (see resume_command.h).
#include "hpcrl/runner/resume_command.h"

#include <nlohmann/json.hpp>

#include "hpcrl/util/fs.h"

namespace hpcrl::runner {

std::string shell_quote(const std::string& s) {
  const std::string plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%";
  if (!s.empty() && s.find_first_not_of(plain) == std::string::npos) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string resume_command(const StartCommand& c) {
  std::string cmd = "hpcrl run " + shell_quote(c.pipeline) + " --out " + shell_quote(c.out);
  for (const auto& s : c.overrides) cmd += " --set " + shell_quote(s);
  cmd += " --resume";
  if (c.world > 1) cmd += "  (with the same launcher and " + std::to_string(c.world) + " ranks)";
  return cmd;
}

void write_start_command(const std::string& run_dir, const StartCommand& c) {
  nlohmann::json j{{"pipeline", c.pipeline}, {"set", c.overrides}, {"out", c.out}, {"world", c.world}};
  fs::write_file_atomic(run_dir + "/command.json", j.dump(1) + "\n");
}

std::optional<StartCommand> read_start_command(const std::string& run_dir) {
  try {
    auto j = nlohmann::json::parse(fs::read_file(run_dir + "/command.json", "start command"));
    StartCommand c;
    c.pipeline = j.at("pipeline").get<std::string>();
    c.overrides = j.at("set").get<std::vector<std::string>>();
    c.out = j.at("out").get<std::string>();
    c.world = j.at("world").get<int>();
    return c;
  } catch (const std::exception&) {
    return std::nullopt;  // only a hint is lost; the refusal stands without it
  }
}

}  // namespace hpcrl::runner
