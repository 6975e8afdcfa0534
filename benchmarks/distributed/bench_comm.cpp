// What the Communicator costs over raw MPI. For each op (all-reduce,
// all-gather, all-to-all; float32) and message size (4 KB .. 64 MB) the raw MPI
// call and the communicator call run on the same buffers in alternating short
// samples (a few calls each, ranks released together by a barrier), so both
// see the same machine load; each is reported as its median sample, with bus
// bandwidth (nccl-tests convention) and the ratio hpcrl/baseline.
//
// all_gather and all_to_all return a new tensor, so they are compared with raw
// MPI that also allocates its output each call ("raw+alloc"): on CPU a fresh
// 64 MB buffer costs its page faults whoever allocates it. all_gather_into
// (preallocated output) is compared with the plain raw call. Tracing is off.
// Run: mpirun -np 2 bench_comm [--max-mb N] [--samples S]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "hpcrl/distributed/bootstrap.h"
#include "../bench_timing.h"

namespace {

using hpcrl::bench::Clock;
using hpcrl::bench::median;

// Seconds per call of `f` over `iters` calls; every rank times the same window
// and the slowest rank's time counts (a collective is as fast as its slowest rank).
// The barrier is outside the timed window.
double time_calls(int iters, const std::function<void()>& f) {
  MPI_Barrier(MPI_COMM_WORLD);
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) f();
  double local = std::chrono::duration<double>(Clock::now() - t0).count() / iters, slowest = 0;
  MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

struct Row {
  std::string op, baseline;
  int64_t bytes;
  double raw_s, comm_s, busbw_factor;
  int samples;
};

std::string human(int64_t bytes) {
  return bytes >= (1 << 20) ? std::to_string(bytes >> 20) + " MB" : std::to_string(bytes >> 10) + " KB";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace hpcrl;
  const dist::WorldInfo& w = dist::init(&argc, &argv);
  int64_t max_bytes = 64ll << 20;
  int samples_small = 101;  // per path, for messages up to 1 MB; fewer for larger ones
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--max-mb")) max_bytes = std::atoll(argv[i + 1]) << 20;
    if (!std::strcmp(argv[i], "--samples")) samples_small = std::atoi(argv[i + 1]);
  }
  at::set_num_threads(1);
  auto comm = dist::world_comm();
  const int n = w.size;
  std::vector<Row> rows;
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    const int64_t elems = bytes / 4;  // float32; `bytes` is the all-reduce buffer / all-gather output / all-to-all total
    const int count = static_cast<int>(elems / n);
    // A sample is ~256 KB of traffic (1-64 calls); large messages get fewer samples.
    const int iters = static_cast<int>(std::clamp<int64_t>((256ll << 10) / bytes, 1, 64));
    const int samples = bytes <= (1 << 20) ? samples_small : bytes <= (16 << 20) ? std::max(samples_small / 3, 3)
                                                                                 : std::max(samples_small / 9, 3);
    at::Tensor buf = at::zeros({elems});
    at::Tensor part = at::ones({elems / n});
    at::Tensor out = at::empty({elems});
    struct Case {
      const char* op;
      const char* baseline;
      double busbw_factor;  // busbw = bytes / time · factor
      std::function<void()> raw, wrapped;
    };
    auto raw_gather = [&](at::Tensor& dst) {
      MPI_Allgather(part.data_ptr(), count, MPI_FLOAT, dst.data_ptr(), count, MPI_FLOAT, MPI_COMM_WORLD);
    };
    auto raw_alltoall = [&](at::Tensor& dst) {
      MPI_Alltoall(buf.data_ptr(), count, MPI_FLOAT, dst.data_ptr(), count, MPI_FLOAT, MPI_COMM_WORLD);
    };
    std::vector<Case> cases = {
        {"all_reduce", "raw", 2.0 * (n - 1) / n,
         [&] { MPI_Allreduce(MPI_IN_PLACE, buf.data_ptr(), static_cast<int>(elems), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); },
         [&] { comm->all_reduce(buf, dist::ReduceOp::kSum); }},
        {"all_gather_into", "raw", double(n - 1) / n, [&] { raw_gather(out); },
         [&] { comm->all_gather_into(out, part); }},
        {"all_gather", "raw+alloc", double(n - 1) / n,
         [&] {
           at::Tensor fresh = at::empty({elems});
           raw_gather(fresh);
         },
         [&] { at::Tensor g = comm->all_gather(part, 0); }},
        {"all_to_all", "raw+alloc", double(n - 1) / n,
         [&] {
           at::Tensor fresh = at::empty({elems});
           raw_alltoall(fresh);
         },
         [&] { at::Tensor a = comm->all_to_all(buf); }},
    };
    for (auto& c : cases) {
      c.raw();  // warm up both paths (connections, first touch of the buffers)
      c.wrapped();
      std::vector<double> raw, wrapped;
      for (int k = 0; k < samples; ++k) {
        raw.push_back(time_calls(iters, c.raw));
        wrapped.push_back(time_calls(iters, c.wrapped));
      }
      rows.push_back({c.op, c.baseline, bytes, median(raw), median(wrapped), c.busbw_factor, samples});
    }
  }
  if (w.rank == 0) {
    double load[1] = {0};
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
      if (std::fscanf(f, "%lf", &load[0]) != 1) load[0] = -1;
      std::fclose(f);
    }
    std::printf("# hpcrl::dist vs raw MPI: %d ranks, float32, median of alternating samples, load average %.1f\n", n,
                load[0]);
    std::printf("| op | size | baseline | samples | baseline µs | hpcrl µs | overhead µs | hpcrl/baseline | baseline busbw GB/s | hpcrl busbw GB/s |\n");
    std::printf("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const auto& r : rows)
      std::printf("| %s | %s | %s | %d | %.1f | %.1f | %.1f | %.3f | %.2f | %.2f |\n", r.op.c_str(),
                  human(r.bytes).c_str(), r.baseline.c_str(), r.samples, r.raw_s * 1e6, r.comm_s * 1e6,
                  (r.comm_s - r.raw_s) * 1e6, r.comm_s / r.raw_s, r.bytes / r.raw_s * r.busbw_factor / 1e9,
                  r.bytes / r.comm_s * r.busbw_factor / 1e9);
  }
  comm.reset();
  dist::finalize();
  return 0;
}
