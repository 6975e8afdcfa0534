// A communication thread: runs submitted operations one at a time, in
// submission order, on its own thread. OpenMPI (and other MPIs without an
// asynchronous progress thread) only moves a non-blocking collective forward
// while some MPI call is running on that rank, so an MPI_Iallreduce started
// before a long matmul finishes after it. Running the blocking collective on
// this thread lets it progress while the caller computes (MPI_THREAD_MULTIPLE).
// One thread per communicator keeps every group's collectives in program order.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "hpcrl/distributed/communicator.h"

namespace hpcrl::dist {

// Work completed by another thread: wait() blocks on a condition variable and
// rethrows the operation's exception (every time it is called).
class ThreadWork : public Work {
 public:
  void wait() override;
  bool is_completed() override;
  void finish(std::exception_ptr error);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

class CommThread {
 public:
  CommThread() = default;
  ~CommThread();  // finishes the queue, then joins
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `op`; the thread starts on the first call.
  WorkPtr submit(std::function<void()> op);
  // Returns once everything submitted so far has run (cheap when the queue is empty).
  void drain();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<ThreadWork>>> queue_;
  int in_flight_ = 0;  // queued + running
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace hpcrl::dist
