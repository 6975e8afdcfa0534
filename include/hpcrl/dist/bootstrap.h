// Process start-up for every launch style: `mpirun`, `srun` (PMIx/PMI2), or a
// plain single process with no launcher. Gives world and node-local ranks, binds
// the CUDA device when asked, and turns an exception on any rank into a job-wide
// MPI_Abort so no rank is left hanging in a collective.
#pragma once

#include <string>
#include <vector>

#include "hpcrl/dist/communicator.h"

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

// Logs `message` with the rank and ends the whole job (MPI_Abort) with `code`.
[[noreturn]] void abort_job(const std::string& message, int code);

}  // namespace hpcrl::dist
