// MPI start-up and the world/group communicator factory. The same binary runs
// under mpirun, srun and as a singleton without any launcher, where MPI reports
// a world of one. Under srun, MPI_Init_thread finds its peers through the PMI
// that srun's --mpi plugin provides, and only one that the MPI library was built
// for works: Debian's Open MPI 4.1 needs `srun --mpi=pmix` (with --mpi=none or
// pmi2 it fails in MPI_Init_thread: "OMPI was not built with SLURM's PMI
// support"); docs/slurm.md. Test mains and embedding programs may have initialised MPI
// already: then init() only reads the world and leaves finalisation to them.
#include "hpcrl/distributed/bootstrap.h"

#include <mpi.h>

#include <mutex>
#include <set>

#include "distributed/group_communicator.h"
#include "distributed/mpi/mpi_types.h"
#include "hpcrl/distributed/watchdog.h"
#include "hpcrl/util/check.h"

namespace hpcrl::dist {
namespace {

std::mutex g_mu;
WorldInfo g_world;
bool g_ready = false;
bool g_started_mpi = false;  // we called MPI_Init_thread, so we finalise
CommPtr g_world_comm;

// Node-local rank/size and node index/count. Nodes are numbered by their
// lowest world rank, so node 0 holds world rank 0.
void discover_nodes(WorldInfo& w) {
  MPI_Comm node = MPI_COMM_NULL, leaders = MPI_COMM_NULL;
  mpi::check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node),
             "MPI_Comm_split_type", "world");
  MPI_Comm_rank(node, &w.local_rank);
  MPI_Comm_size(node, &w.local_size);
  const bool leader = w.local_rank == 0;
  mpi::check(MPI_Comm_split(MPI_COMM_WORLD, leader ? 0 : MPI_UNDEFINED, w.rank, &leaders), "MPI_Comm_split",
             "world");
  int ids[2] = {0, 1};  // node index, node count
  if (leader) {
    MPI_Comm_rank(leaders, &ids[0]);
    MPI_Comm_size(leaders, &ids[1]);
    MPI_Comm_free(&leaders);
  }
  mpi::check(MPI_Bcast(ids, 2, MPI_INT, 0, node), "MPI_Bcast", "node");
  w.node = ids[0];
  w.num_nodes = ids[1];
  MPI_Comm_free(&node);
}

void require_init() {
  HPCRL_CHECK(g_ready, "hpcrl::dist::init() has not been called; call it at the start of main()");
}

// 64-bit FNV-1a over the group lists, to catch ranks that disagree on them.
uint64_t fingerprint(const std::vector<std::vector<int>>& groups) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  for (const auto& g : groups) {
    mix(0xffffffffull);
    for (int r : g) mix(static_cast<uint64_t>(r));
  }
  return h;
}

// One MPI_Comm_split over the world for a set of disjoint groups.
CommPtr split(const std::vector<std::vector<int>>& groups, const std::string& name, bool index_names) {
  require_init();
  const int size = g_world.size, me = g_world.rank;
  std::set<int> seen;
  int color = MPI_UNDEFINED, key = 0, index = -1;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    HPCRL_CHECK(!groups[gi].empty(), "group '" << name << "' #" << gi << " is empty");
    for (size_t k = 0; k < groups[gi].size(); ++k) {
      int r = groups[gi][k];
      HPCRL_CHECK(r >= 0 && r < size, "group '" << name << "' lists rank " << r << " outside the world of " << size);
      HPCRL_CHECK(seen.insert(r).second, "group '" << name << "' lists rank " << r << " twice (groups must be disjoint)");
      if (r == me) {
        color = static_cast<int>(gi);
        key = static_cast<int>(k);
        index = static_cast<int>(gi);
      }
    }
  }
  // Every rank must pass the same lists, or the split silently builds different groups.
  uint64_t h = fingerprint(groups), lo = 0, hi = 0;
  mpi::check(MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce", "world");
  mpi::check(MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce", "world");
  HPCRL_CHECK(lo == hi, "group '" << name << "' was created with different rank lists on different ranks; "
                                  "every rank must call new_group/new_groups with the same arguments");
  MPI_Comm comm = MPI_COMM_NULL;
  mpi::check(MPI_Comm_split(MPI_COMM_WORLD, color, key, &comm), "MPI_Comm_split", name);
  if (index < 0) return nullptr;
  std::string label = index_names ? name + "[" + std::to_string(index) + "]" : name;
  return std::make_shared<GroupCommunicator>(comm, label, groups[index]);
}

}  // namespace

const WorldInfo& init(int* argc, char*** argv) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_ready) return g_world;
  int initialized = 0, provided = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    mpi::check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread", "world");
    g_started_mpi = true;
  } else {
    MPI_Query_thread(&provided);
  }
  HPCRL_CHECK(provided == MPI_THREAD_MULTIPLE,
              "the MPI library provides thread level " << provided << ", not MPI_THREAD_MULTIPLE ("
                                                       << MPI_THREAD_MULTIPLE
                                                       << "); asynchronous collectives need it. Use an MPI build "
                                                          "with thread support (OpenMPI/MPICH default builds have it)");
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_world.size);
  discover_nodes(g_world);
  g_ready = true;
  return g_world;
}

const WorldInfo& world() {
  std::lock_guard<std::mutex> lock(g_mu);
  require_init();
  return g_world;
}

void finalize() {
  stop_watchdog();  // its thread uses MPI
  std::lock_guard<std::mutex> lock(g_mu);
  g_world_comm.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (g_started_mpi && !finalized) MPI_Finalize();
  g_started_mpi = false;
}

CommPtr world_comm() {
  std::lock_guard<std::mutex> lock(g_mu);
  require_init();
  if (!g_world_comm) {
    MPI_Comm comm = MPI_COMM_NULL;
    mpi::check(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup", "world");
    std::vector<int> ranks(g_world.size);
    for (int r = 0; r < g_world.size; ++r) ranks[r] = r;
    g_world_comm = std::make_shared<GroupCommunicator>(comm, "world", std::move(ranks));
  }
  return g_world_comm;
}

CommPtr new_group(const std::vector<int>& world_ranks, const std::string& name) {
  return split({world_ranks}, name, /*index_names=*/false);
}

CommPtr new_groups(const std::vector<std::vector<int>>& groups, const std::string& name) {
  return split(groups, name, /*index_names=*/true);
}

}  // namespace hpcrl::dist
