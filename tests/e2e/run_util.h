// Helpers for end-to-end tests: run the hpcrl binary (optionally under mpirun)
// as a child process, capture its output and exit code, read metrics.jsonl.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace hpcrl::test {

struct Proc {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

// Runs `cmd` through /bin/sh, output captured.
Proc run_shell(const std::string& cmd);

// `hpcrl ARGS` (np > 1: under mpirun -np np --oversubscribe); `env`: "VAR=value ..."
// assignments the run (every rank) gets.
Proc run_hpcrl(const std::string& args, int np = 1, const std::string& env = "");

// Starts `hpcrl ARGS` in the background (np ranks); returns the pid of mpirun
// (np > 1) or hpcrl.
int spawn_hpcrl(const std::string& args, int np, const std::string& log_path, const std::string& env = "");
// Waits for the background run; returns its exit code.
int wait_exit(int pid);

std::vector<nlohmann::json> read_metrics(const std::string& path);
// A metrics line without its wall-clock fields and peak memory (they differ between any two runs).
nlohmann::json without_timing(nlohmann::json j);
// The lines of one stage that carry `key`, in file order.
std::vector<nlohmann::json> lines_with(const std::vector<nlohmann::json>& m, const std::string& stage,
                                       const std::string& key);
// A whole file's text ("" when it cannot be read).
std::string read_text(const std::string& path);
// Two runs' metrics.jsonl equal line for line, timing fields aside (a resumed run
// against an uninterrupted one).
void expect_same_metrics(const std::string& a_path, const std::string& b_path);
// Removes the checkpoints of stage `stage` (e.g. "00-sft") in `run_dir` after
// step `step`, and its complete.json, so that --resume continues from `step`
// (a gtest failure when that checkpoint is missing).
void back_to_checkpoint(const std::string& run_dir, const std::string& stage, int64_t step);
// Goes back to checkpoint `step` as above, resumes with `hpcrl run RUN_ARGS
// --resume` on `np` ranks, and expects metrics.jsonl to be what it was, line for
// line, timing aside.
void expect_exact_resume(const std::string& run_args, const std::string& run_dir, const std::string& stage,
                         int64_t step, int np = 1);
// Two runs' curves agree: as many lines (at least one), each line's `key`
// within rel_tol · max(1, |a|) (gtest failures name the key and the line).
void expect_close_curves(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                         const std::string& key, double rel_tol);
// Two RL runs' iteration lines (as many, at least one): the same rollouts
// (reward/mean and response_len/mean equal at each iteration) and, for each
// (key, rel_tol) of `close`, values within expect_close_curves's bound.
void expect_same_rollouts(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b,
                          const std::vector<std::pair<std::string, double>>& close);
// tests/e2e/data/tiny.yaml with each (from, to) replaced once, written to
// `path` (returned). A `from` the file lacks is a gtest failure naming it.
std::string write_tiny_config_with(const std::string& path,
                                   const std::vector<std::pair<std::string, std::string>>& edits);
// A fresh empty directory under /tmp for one test.
std::string scratch_dir(const std::string& name);
// Runs `cfg` as `base` (on base_np ranks) and again with `changed` (more --set
// flags, on changed_np ranks) under scratch dir `name`; returns each run's
// metrics lines of `stage` that have `key`. Fails the test if either run does.
std::pair<std::vector<nlohmann::json>, std::vector<nlohmann::json>> run_twice(
    const std::string& cfg, const std::string& name, int base_np, const std::string& changed, int changed_np,
    const std::string& stage, const std::string& key);

}  // namespace hpcrl::test
