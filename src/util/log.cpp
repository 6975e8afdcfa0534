// spdlog setup shared by every command. Keeps the sinks so a file sink can be
// added once the run directory is known, without re-creating the logger.
#include "hpcrl/util/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "hpcrl/util/error.h"

namespace hpcrl::log {
namespace {
int g_rank = 0;
int g_world = 1;
std::shared_ptr<spdlog::sinks::basic_file_sink_mt> g_file_sink;

spdlog::level::level_enum parse_level(const std::string& level) {
  static const char* names[] = {"trace", "debug", "info", "warn", "error", "off"};
  static const spdlog::level::level_enum levels[] = {spdlog::level::trace, spdlog::level::debug,
                                                     spdlog::level::info,  spdlog::level::warn,
                                                     spdlog::level::err,   spdlog::level::off};
  for (int i = 0; i < 6; ++i)
    if (level == names[i]) return levels[i];
  throw InputError("unknown log level '" + level + "': use one of trace, debug, info, warn, error, off");
}

std::string pattern() {
  return "[%Y-%m-%d %H:%M:%S.%e] [rank " + std::to_string(g_rank) + "] [%^%l%$] %v";
}
}  // namespace

void init(int rank, int world, const std::string& level) {
  g_rank = rank;
  g_world = world;
  auto lvl = parse_level(level);
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  // Other ranks still show warnings and errors: a failure on rank 3 must be visible.
  console->set_level(rank == 0 ? lvl : std::max(lvl, spdlog::level::warn));
  auto logger = std::make_shared<spdlog::logger>("hpcrl", console);
  logger->set_level(lvl);
  logger->set_pattern(pattern());
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
}

void add_rank_file(const std::string& dir) {
  std::filesystem::create_directories(dir);
  char name[32];
  std::snprintf(name, sizeof(name), "rank-%05d.log", g_rank);
  g_file_sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(dir + "/" + name, false);
  g_file_sink->set_pattern(pattern());
  g_file_sink->set_level(spdlog::default_logger()->level());
  spdlog::default_logger()->sinks().push_back(g_file_sink);
}

void close_rank_file() {
  if (!g_file_sink) return;
  g_file_sink->flush();
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), g_file_sink), sinks.end());
  g_file_sink.reset();
}

int rank() { return g_rank; }
int world() { return g_world; }

}  // namespace hpcrl::log
