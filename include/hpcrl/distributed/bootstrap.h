// Process start-up for every launch style: `mpirun`, `srun` (PMIx/PMI2), or a
// plain single process with no launcher. Gives world and node-local ranks, binds
// the CUDA device when asked, and turns an exception on any rank into a job-wide
// MPI_Abort so no rank is left hanging in a collective.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "hpcrl/config/enums.h"
#include "hpcrl/distributed/communicator.h"

namespace hpcrl::dist {

struct WorldInfo {
  int rank = 0, size = 1;              // MPI_COMM_WORLD
  int local_rank = 0, local_size = 1;  // ranks on this node (MPI_Comm_split_type SHARED)
  int node = 0, num_nodes = 1;         // node index, node count
};

// Initialises MPI (MPI_THREAD_MULTIPLE) unless it already is; idempotent.
const WorldInfo& init(int* argc, char*** argv);
const WorldInfo& world();
// MPI_Finalize if init() started MPI. Safe to call more than once.
void finalize();

// Communicator over all ranks.
CommPtr world_comm();
// Collective over the world: every rank calls it with the same lists. Ranks not
// in `world_ranks` get nullptr. `name` labels the group in traces.
CommPtr new_group(const std::vector<int>& world_ranks, const std::string& name);
// Collective over the world: creates all of `groups` (disjoint lists of world
// ranks, each ordered by group rank) with one MPI_Comm_split. Returns the
// communicator of the group holding this rank, named "<name>[<group index>]",
// or nullptr when this rank is in none of them.
CommPtr new_groups(const std::vector<std::vector<int>>& groups, const std::string& name);

// Binds this rank's accelerator for `device` (run.device). For cuda:
// cuda:<local_rank>, or cuda:0 when the launcher exposes one device per rank
// (Slurm --gpus-per-task=1). Returns the device index, -1 for cpu. InputError
// when cuda is asked of a build without a CUDA LibTorch or a node without GPUs.
int bind_device(config::Device device);

// Logs `message` with the rank and ends the whole job (MPI_Abort) with `code`.
[[noreturn]] void abort_job(const std::string& message, int code);

// Makes std::terminate (an exception escaping a thread, noexcept violation)
// call abort_job with the exception's message, so a failing thread ends the job.
void install_terminate_handler();

// Runs `body` and returns its exit code. An exception is reported with its rank;
// with more than one rank the job is then ended by abort_job (exit 2 for
// InputError, 1 otherwise) because the other ranks may be waiting in a
// collective; a single process just returns that code. Installs the terminate
// handler. Meant for main(): `return dist::run_or_abort([&] { ... });`.
int run_or_abort(const std::function<int()>& body);

}  // namespace hpcrl::dist
