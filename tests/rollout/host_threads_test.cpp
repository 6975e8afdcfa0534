// parallel::host_parallel_for (host_threads.h): the range really is split over
// the threads LibTorch is given (at::parallel_for called from a file built
// without OpenMP runs it all on the calling thread), every index is visited
// once, chunks are at least `grain` long, and a range of one chunk stays on
// the calling thread.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "hpcrl/parallel/host_threads.h"

namespace {

using hpcrl::parallel::host_parallel_for;

// Sets the intra-op thread count for one test and puts the old one back.
struct ThreadCount {
  explicit ThreadCount(int n) : old(at::get_num_threads()) { at::set_num_threads(n); }
  ~ThreadCount() { at::set_num_threads(old); }
  int old;
};

// The threads and the [begin, end) chunks one call ran.
struct Record {
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  void add(int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mutex);
    threads.insert(std::this_thread::get_id());
    chunks.emplace_back(b, e);
  }
};

TEST(HostThreads, ARangeOfManyChunksRunsOnTwoThreadsWhenTorchHasTwo) {
  ThreadCount two(2);
  Record seen;
  host_parallel_for(0, 64, 1, [&](int64_t b, int64_t e) { seen.add(b, e); });
  EXPECT_EQ(seen.threads.size(), 2u);  // OpenMP's static split: one chunk per thread
}

TEST(HostThreads, EveryIndexOnceAndChunksAtLeastTheGrain) {
  ThreadCount two(2);
  Record seen;
  std::vector<int> visits(100, 0);
  host_parallel_for(3, 103, 10, [&](int64_t b, int64_t e) {
    seen.add(b, e);
    for (int64_t i = b; i < e; ++i) ++visits[i - 3];  // chunks are disjoint: no race
  });
  EXPECT_EQ(visits, std::vector<int>(100, 1));
  for (const auto& [b, e] : seen.chunks) EXPECT_TRUE(e - b >= 10 || e == 103) << b << ".." << e;
}

TEST(HostThreads, ARangeNoLongerThanTheGrainStaysOnTheCallingThread) {
  ThreadCount two(2);
  Record seen;
  host_parallel_for(0, 8, 8, [&](int64_t b, int64_t e) { seen.add(b, e); });
  ASSERT_EQ(seen.chunks.size(), 1u);
  EXPECT_EQ(seen.chunks[0], std::make_pair(int64_t(0), int64_t(8)));
  EXPECT_EQ(*seen.threads.begin(), std::this_thread::get_id());
}

}  // namespace
