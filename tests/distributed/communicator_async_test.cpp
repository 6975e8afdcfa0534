// Asynchronous communicator calls: results, ordering with blocking calls,
// error propagation through wait(), and overlap — an all-reduce started with
// all_reduce_async completes while the calling thread computes and makes no MPI
// call (OpenMPI alone would not progress an MPI_Iallreduce then). Also checks
// that each call lands in the trace with its op, group and byte count.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "distributed/comm_test_util.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/trace/reader.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/error.h"

namespace hpcrl::dist {
namespace {

using testing::same;
using testing::world_comm_for_test;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TEST(Async, AllReduceAndBroadcastResults) {
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  at::Tensor a = at::full({1000}, r + 1, at::kFloat);
  at::Tensor b = at::full({10}, r, at::kBFloat16);
  at::Tensor c = at::full({3}, r * 7, at::kLong);
  WorkPtr wa = comm->all_reduce_async(a, ReduceOp::kSum);
  WorkPtr wb = comm->all_reduce_async(b, ReduceOp::kMax);
  WorkPtr wc = comm->broadcast_async(c, n - 1);
  wc->wait();
  wa->wait();
  wb->wait();
  EXPECT_TRUE(wa->is_completed() && wb->is_completed() && wc->is_completed());
  EXPECT_TRUE(same(a, at::full({1000}, n * (n + 1) / 2, at::kFloat)));
  EXPECT_TRUE(same(b, at::full({10}, n - 1, at::kBFloat16)));
  EXPECT_TRUE(same(c, at::full({3}, (n - 1) * 7, at::kLong)));
}

TEST(Async, BlockingCallAfterAsyncKeepsProgramOrder) {
  // A blocking all_reduce issued while async ones are queued must run after
  // them on every rank, or ranks would pair up different collectives.
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  std::vector<at::Tensor> ts;
  std::vector<WorkPtr> works;
  for (int i = 0; i < 8; ++i) {
    ts.push_back(at::full({4096 * (i + 1)}, r + i, at::kDouble));
    works.push_back(comm->all_reduce_async(ts.back(), ReduceOp::kSum));
  }
  at::Tensor sync = at::full({5}, r, at::kInt);
  comm->all_reduce(sync, ReduceOp::kMax);
  for (auto& w : works) EXPECT_TRUE(w->is_completed());  // drained before the blocking call
  EXPECT_TRUE(same(sync, at::full({5}, n - 1, at::kInt)));
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(same(ts[i], at::full({4096 * (i + 1)}, n * (n - 1) / 2 + n * i, at::kDouble)));
}

TEST(Async, ComputeOverlapsAllReduce) {
  // Rank 0 joins the all-reduce 0.5 s late. Every other rank starts it with
  // all_reduce_async and computes meanwhile, never calling MPI (is_completed()
  // only reads a flag): the reduction can finish only after rank 0 joins, and
  // only because the communication thread drives it while the main thread computes.
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  at::Tensor big = at::full({8 * 1024 * 1024}, r + 1, at::kFloat);  // 32 MB
  comm->barrier();
  if (r == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    comm->all_reduce_async(big, ReduceOp::kSum)->wait();
  } else {
    at::Tensor x = at::rand({128, 128});
    auto t0 = Clock::now();
    WorkPtr w = comm->all_reduce_async(big, ReduceOp::kSum);
    long chunks = 0;
    while (!w->is_completed() && seconds_since(t0) < 60) {
      x = at::tanh(at::matmul(x, x) * 0.01);
      ++chunks;
    }
    const double overlapped_s = seconds_since(t0);
    EXPECT_TRUE(w->is_completed()) << "all_reduce_async made no progress in 60 s of compute";
    EXPECT_GT(chunks, 0);               // compute ran while the reduction was in flight...
    EXPECT_GE(overlapped_s, 0.4);       // ...which waited for rank 0 to join
    w->wait();
    if (r == 1)
      std::printf("[overlap] rank 1 computed %ld chunks (%.3f s) while its 32 MB all_reduce waited for rank 0 "
                  "and completed\n", chunks, overlapped_s);
  }
  EXPECT_TRUE(same(big, at::full({8 * 1024 * 1024}, n * (n + 1) / 2, at::kFloat)));
}

TEST(Async, RingOfAsyncSendsAndReceives) {
  auto comm = world_comm_for_test();
  const int n = comm->size(), r = comm->rank();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  // Every rank posts its send before its receive: fine only because p2p async does not queue.
  at::Tensor out = at::full({512 * 1024}, r, at::kFloat), in = at::empty({512 * 1024}, at::kFloat);
  WorkPtr s = comm->send_async(out, next, 11);
  WorkPtr v = comm->recv_async(in, prev, 11);
  v->wait();
  s->wait();
  EXPECT_TRUE(s->is_completed() && v->is_completed());
  EXPECT_TRUE(same(in, at::full({512 * 1024}, prev, at::kFloat)));
}

TEST(Async, FailureSurfacesAtWait) {
  auto comm = world_comm_for_test();
  at::Tensor flags = at::zeros({4}, at::kBool);  // booleans cannot be summed by the MPI backend
  WorkPtr w = comm->all_reduce_async(flags, ReduceOp::kSum);
  try {
    w->wait();
    FAIL() << "expected an error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be reduced"), std::string::npos) << e.what();
  }
  // The group still works afterwards.
  at::Tensor t = at::ones({2});
  comm->all_reduce(t, ReduceOp::kSum);
  EXPECT_TRUE(same(t, at::full({2}, comm->size(), at::kFloat)));
}

TEST(Trace, EveryCallIsRecordedWithGroupAndBytes) {
  auto comm = world_comm_for_test();
  auto dir = std::filesystem::temp_directory_path() /
             ("hpcrl-dist-trace-" + std::to_string(getpid()) + "-" + std::to_string(comm->rank()));
  trace::start(dir.string(), comm->rank());
  at::Tensor t = at::ones({1000}, at::kFloat);  // 4000 bytes
  comm->all_reduce(t, ReduceOp::kSum);
  comm->all_reduce_async(t, ReduceOp::kSum)->wait();
  at::Tensor g = comm->all_gather(at::ones({10}, at::kLong), 0);  // output 80·n bytes
  std::string path = trace::file_path();
  trace::stop();
  trace::TraceFile file = trace::read_trace_file(path);
  int all_reduce = 0, all_gather = 0;
  for (const auto& e : file.events) {
    if (e.group != "world") continue;
    double bytes = -1;
    for (const auto& [k, v] : e.args)
      if (k == "bytes") bytes = v;
    if (e.name == "all_reduce" && bytes == 4000) ++all_reduce;
    if (e.name == "all_gather" && bytes == 80.0 * comm->size()) ++all_gather;
  }
  EXPECT_EQ(all_reduce, 2);  // the blocking and the async one
  EXPECT_EQ(all_gather, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hpcrl::dist
