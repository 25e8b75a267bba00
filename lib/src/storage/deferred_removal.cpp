#include "storage/deferred_removal.hpp"

#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "base/background_thread.hpp"

namespace h5dcp::detail {
namespace {

class Remover {
 public:
  ~Remover() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    if (worker_.joinable()) worker_.join();  // after the queue is empty
  }

  void add(const std::string& path) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(path);
      if (!worker_.joinable()) worker_ = std::thread([this] { run(); });
    }
    changed_.notify_all();
  }

  void wait_idle() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return queue_.empty() && !removing_; });
  }

 private:
  void run() {
    run_as_background_thread();
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      changed_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      const std::string path = std::move(queue_.front());
      queue_.pop_front();
      removing_ = true;
      lock.unlock();
      ::unlink(path.c_str());  // already gone is fine: a later save may have cleaned it up
      lock.lock();
      removing_ = false;
      changed_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> queue_;
  bool removing_ = false;
  bool stop_ = false;
  std::thread worker_;
};

Remover& remover() {
  static Remover instance;
  return instance;
}

}  // namespace

void remove_in_background(const std::string& path) noexcept {
  try {
    remover().add(path);
  } catch (...) {
    ::unlink(path.c_str());
  }
}

void finish_background_removals() noexcept {
  try {
    remover().wait_idle();
  } catch (...) {
  }
}

}  // namespace h5dcp::detail
