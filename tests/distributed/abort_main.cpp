// A job in which the last rank fails while every other rank waits in a
// collective it will never join. run_or_abort must end the whole job quickly
// with a non-zero exit (check_abort.sh asserts the time, code and message).
// Modes: "throw" (RuntimeError in main), "input" (InputError -> exit 2),
// "thread" (an exception escaping a std::thread -> terminate handler).
#include <ATen/ATen.h>

#include <string>
#include <thread>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/util/error.h"
#include "hpcrl/util/log.h"

int main(int argc, char** argv) {
  using namespace hpcrl;
  return dist::run_or_abort([&] {
    const dist::WorldInfo& w = dist::init(&argc, &argv);
    log::init(w.rank, w.size, "info");
    const std::string mode = argc > 1 ? argv[1] : "throw";
    auto comm = dist::world_comm();
    comm->barrier();
    if (w.rank == w.size - 1) {
      if (mode == "throw") throw RuntimeError("deliberate failure on the last rank");
      if (mode == "input") throw InputError("deliberate bad input on the last rank");
      if (mode == "thread") std::thread([] { throw RuntimeError("deliberate failure in a worker thread"); }).join();
    }
    at::Tensor t = at::ones({4});
    comm->all_reduce(t, dist::ReduceOp::kSum);  // blocks forever without the abort
    dist::finalize();
    return 0;
  });
}
