// Rank-aware logging on top of spdlog. Every line carries the rank; rank 0 logs
// to the console (stderr, so `--json` stdout stays clean), other ranks only
// print warnings and errors there; every rank can also log to its own file
// (runs/NAME/logs/rank-NNNNN.log) once the run directory exists.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace hpcrl::log {

// Sets up the default spdlog logger. `level` is trace|debug|info|warn|error|off;
// an unknown level is an InputError listing the valid ones.
void init(int rank, int world, const std::string& level);

// Adds the per-rank file sink `<dir>/rank-NNNNN.log` (dir is created).
void add_rank_file(const std::string& dir);

// Flushes and drops the file sink (before the run directory is renamed/removed).
void close_rank_file();

int rank();
int world();

}  // namespace hpcrl::log
