#include "core/hdf5_gate.hpp"

#include <condition_variable>
#include <mutex>

namespace h5dcp::detail {
namespace {

std::mutex mutex;
std::condition_variable changed;
bool held = false;

}  // namespace

void Hdf5Gate::acquire() {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [] { return !held; });
  held = true;
}

void Hdf5Gate::release() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    held = false;
  }
  changed.notify_all();
}

}  // namespace h5dcp::detail
