// How a subcommand plugs into the `hpcrl` executable: each src/cli/<name>.cpp
// defines one static Registration that adds its CLI11 subcommand and returns the
// function to run when that subcommand was chosen. main.cpp owns parsing, the
// exception → exit-code mapping (InputError → 2, anything else → 1) and logging
// set-up; commands only return their exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace hpcrl::cli {

using RunFn = std::function<int()>;
// Adds the subcommand to `app`; returns what to run if it is selected.
using SetupFn = std::function<RunFn(CLI::App& app)>;

struct Command {
  std::string name;
  int order;  // position in `hpcrl --help`
  SetupFn setup;
};

std::vector<Command>& registry();

struct Registration {
  Registration(std::string name, int order, SetupFn setup) {
    registry().push_back({std::move(name), order, std::move(setup)});
  }
};

// A rank count for --world: a whole number from `least` to 2^20, with a message that says so
// (CLI11's PositiveNumber printed float limits such as 1.17549e-38 to 3.40282e+38).
inline CLI::Validator world_size_check(long long least) {
  return CLI::Validator(
      [least](std::string& text) -> std::string {
        long long v = 0;
        size_t used = 0;
        try {
          v = std::stoll(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == text.size() && v >= least && v <= (1LL << 20)) return "";
        return "--world " + text + ": give the number of ranks the job runs with, a whole number from " +
               std::to_string(least) + " to 1048576" + (least == 0 ? " (0 skips the checks that need it)" : "");
      },
      "RANKS");
}

// Options every command shares, filled by main.cpp before the command runs.
struct GlobalOptions {
  std::string log_level = "info";
};
GlobalOptions& global_options();

}  // namespace hpcrl::cli
