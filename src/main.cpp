// The `hpcrl` executable: parse the command line, dispatch to the chosen
// subcommand (src/cli/*.cpp), map failures to exit codes. No logic lives here.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <exception>

#include "cli/command.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/host_memory.h"
#include "hpcrl/util/log.h"

namespace hpcrl::cli {
std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}
GlobalOptions& global_options() {
  static GlobalOptions options;
  return options;
}
}  // namespace hpcrl::cli

int main(int argc, char** argv) {
  using namespace hpcrl;
  host_memory::keep_freed_memory();
  CLI::App app{"hpcrl: post-train reasoning LLMs (SFT -> GRPO/PPO -> distillation) on HPC clusters"};
  app.require_subcommand(1);
  app.fallthrough();
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  app.add_option("--log-level", cli::global_options().log_level, "trace|debug|info|warn|error|off")
      ->capture_default_str();

  auto commands = cli::registry();
  std::sort(commands.begin(), commands.end(), [](const auto& a, const auto& b) { return a.order < b.order; });
  std::vector<std::pair<CLI::App*, cli::RunFn>> runners;
  for (auto& c : commands) {
    auto before = app.get_subcommands({}).size();
    cli::RunFn fn = c.setup(app);
    auto subs = app.get_subcommands({});
    if (subs.size() > before) runners.emplace_back(subs.back(), std::move(fn));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitBadInput;
  }

  try {
    log::init(0, 1, cli::global_options().log_level);
    for (auto& [sub, fn] : runners)
      if (sub->parsed()) return fn();
    return kExitBadInput;
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return kExitRuntime;
  }
}
