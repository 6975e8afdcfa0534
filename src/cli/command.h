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

// Options every command shares, filled by main.cpp before the command runs.
struct GlobalOptions {
  std::string log_level = "info";
};
GlobalOptions& global_options();

}  // namespace hpcrl::cli
