// The memory bandwidth the batch-1 decode rows of bench_vs_llama_cpp.sh are
// measured against: copying a 512 MiB buffer split over THREADS threads (each
// byte read once and written once, both counted), best of 7. Torch-free, so
// the figure belongs to neither engine.
//
//   memory_bandwidth THREADS     prints "copy GB/s" on stdout
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1;
  const size_t bytes = size_t(512) << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 2);
  double best = 1e30;
  for (int round = 0; round < 7; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t lo = bytes * t / threads, hi = bytes * (t + 1) / threads;
        std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
      });
    for (auto& th : pool) th.join();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::printf("%.2f\n", 2.0 * double(bytes) / best / 1e9);
  return dst[bytes / 2] == 1 ? 0 : 1;
}
