// The communication thread behind the MPI backend's asynchronous collectives.
// See comm_thread.h for why the thread exists at all.
#include "distributed/comm_thread.h"

namespace hpcrl::dist {

void ThreadWork::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool ThreadWork::is_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void ThreadWork::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

WorkPtr CommThread::submit(std::function<void()> op) {
  auto work = std::make_shared<ThreadWork>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    queue_.emplace_back(std::move(op), work);
    ++in_flight_;
  }
  work_cv_.notify_one();
  return work;
}

void CommThread::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return in_flight_ == 0; });
}

void CommThread::loop() {
  for (;;) {
    std::function<void()> op;
    std::shared_ptr<ThreadWork> work;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      op = std::move(queue_.front().first);
      work = std::move(queue_.front().second);
      queue_.pop_front();
    }
    std::exception_ptr error;
    try {
      op();
    } catch (...) {
      error = std::current_exception();
    }
    work->finish(error);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
    }
    idle_cv_.notify_all();
  }
}

}  // namespace hpcrl::dist
