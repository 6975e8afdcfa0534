// The command that continues a run, printed where a user needs it: when a run
// stops resumably ("Continue with: …") and when --resume is refused. It is
// the whole command — pipeline, --out and every --set of the start — because
// a resume without the original --set flags is a different config (refused).
// The start's arguments are kept in RUN/command.json for the refusal, which
// happens in a later invocation that may have lost them.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hpcrl::runner {

struct StartCommand {
  std::string pipeline;                // the pipeline file as given
  std::vector<std::string> overrides;  // --set values, in order
  std::string out;                     // the run directory
  int world = 1;                       // ranks it ran with
};

// `hpcrl run PIPELINE --out DIR [--set K=V]... --resume`, every argument
// quoted for a POSIX shell where it needs it; with a note of the rank count
// when the run had more than one (hpcrl does not know the launcher).
std::string resume_command(const StartCommand& c);

// `s` as one POSIX shell word: as is when it needs no quoting, else in single quotes.
std::string shell_quote(const std::string& s);

// RUN/command.json, written when a run starts.
void write_start_command(const std::string& run_dir, const StartCommand& c);
// nullopt when the file is missing or unreadable (a run directory from before it was written).
std::optional<StartCommand> read_start_command(const std::string& run_dir);

}  // namespace hpcrl::runner
