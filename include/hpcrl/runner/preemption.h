// Preemption: SIGTERM or SIGUSR1 (Slurm's --signal=USR1@120) on any rank asks
// the run to stop. The handler only sets a flag; at the next step boundary all
// ranks reduce the flag (so no rank is left waiting in a collective), save a
// checkpoint and exit with 75 (EX_TEMPFAIL: stopped, resumable).
#pragma once

#include "hpcrl/dist/communicator.h"

namespace hpcrl::runner {

// Installs the handlers (idempotent).
void install_stop_handlers();
// This process received a stop signal.
bool stop_signalled();
// Collective over `world`: true when any rank received one.
bool stop_requested(const dist::CommPtr& world);
// For tests: pretend a signal arrived.
void request_stop();

}  // namespace hpcrl::runner
