// Failure handling for multi-rank jobs. A rank that throws while the others
// wait in a collective would leave them hanging until the wall-clock limit
// eats the allocation; instead the failing rank reports its error with its
// rank and calls MPI_Abort, which the launcher turns into a job-wide exit.
#include <mpi.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/util/error.h"

namespace hpcrl::dist {
namespace {

bool mpi_running() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

int world_rank_or(int fallback) {
  int rank = fallback;
  if (mpi_running()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  if (mpi_running()) MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

[[noreturn]] void on_terminate() {
  std::string message = "std::terminate called";
  if (std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      message = std::string("uncaught exception: ") + ex.what();
    } catch (...) {
      message = "uncaught exception of a non-standard type";
    }
  }
  abort_job(message, kExitRuntime);
}

}  // namespace

void abort_job(const std::string& message, int code) {
  const int rank = world_rank_or(0);
  // After hpcrl::log::init the default logger is "hpcrl": it carries the rank
  // and also writes the per-rank log file. Before that, stderr directly.
  auto logger = spdlog::default_logger();
  if (logger && logger->name() == "hpcrl") {
    logger->critical("fatal (ending the job): {}", message);
    logger->flush();
  } else {
    std::fprintf(stderr, "[rank %d] fatal (ending the job): %s\n", rank, message.c_str());
  }
  std::fflush(stderr);
  std::fflush(stdout);
  if (mpi_running() && world_size() > 1) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void install_terminate_handler() { std::set_terminate(on_terminate); }

int run_or_abort(const std::function<int()>& body) {
  install_terminate_handler();
  int code = kExitRuntime;
  std::string message;
  try {
    return body();
  } catch (const InputError& e) {
    code = kExitBadInput;
    message = e.what();
  } catch (const std::bad_alloc&) {  // where no caller said what it was building
    message = "out of memory (std::bad_alloc): this command needs more memory than this machine gives it; "
              "`hpcrl plan PIPELINE --world N` estimates a run's memory per rank";
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "exception of a non-standard type";
  }
  // Other ranks may be blocked in a collective this rank will never join.
  if (world_size() > 1) abort_job(message, code);
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return code;
}

}  // namespace hpcrl::dist
