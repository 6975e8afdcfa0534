// Preemption: SIGTERM or SIGUSR1 (Slurm's --signal=USR1@120) on any rank asks
// the run to stop. The handler only records the signal (and writes one line to
// stderr, so the job log shows when it arrived); the ranks then agree on the
// stop collectively — at the next step boundary, or inside long work (between
// decode steps of a rollout, between evaluation batches: algo/stages/stop_inside.h) —
// save a checkpoint and exit with 75 (EX_TEMPFAIL: stopped, resumable). SIGINT (Ctrl-C)
// stops the same way; a second SIGINT ends the process at once (exit 130).
// `hpcrl run` installs the handlers before anything else, so a stop that arrives while
// the job starts (MPI, inputs, weights) ends it with 75 before the first step too.
#pragma once

#include <string>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::runner {

// Installs the handlers (idempotent; again with the rank once it is known). `rank`
// labels the arrival line.
void install_stop_handlers(int rank = 0);
// This process's rank as its launcher says (SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK),
// before MPI is up; 0 without one.
int launcher_rank();
// This process received a stop signal (not collective; safe to poll often).
bool stop_signalled();
// Collective over `world`: true when any rank received one.
bool stop_requested(const dist::CommPtr& world);
// For tests: pretend a signal arrived.
void request_stop();
// "SIGUSR1" / "SIGTERM" / "SIGINT" of the first stop signal this process received ("" before any).
std::string stop_signal_name();
// Seconds since that signal arrived (0 before any).
double seconds_since_stop_signal();

}  // namespace hpcrl::runner
