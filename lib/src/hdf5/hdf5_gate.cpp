#include "hdf5/hdf5_gate.hpp"

#include <condition_variable>
#include <mutex>
#include <thread>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

std::mutex mutex;
std::condition_variable changed;
bool gate_taken = false;
// The thread that took the gate, or none once its hold was handed over.
std::thread::id owner;

}  // namespace

Hdf5GateHold::Hdf5GateHold() {
  std::unique_lock<std::mutex> lock(mutex);
  if (gate_taken && owner == std::this_thread::get_id())
    throw UsageError(
        "h5dcp: an h5dcp call that reads or writes files was made while this thread is inside another one (from "
        "a planner, a Stateful, or a progress callback): it would wait for itself forever; make the call after "
        "the first one returns");
  changed.wait(lock, [] { return !gate_taken; });
  gate_taken = true;
  owner = std::this_thread::get_id();
  held_ = true;
}

Hdf5GateHold::~Hdf5GateHold() { release(); }

Hdf5GateHold::Hdf5GateHold(Hdf5GateHold&& other) noexcept : held_(other.held_) { other.held_ = false; }

Hdf5GateHold& Hdf5GateHold::operator=(Hdf5GateHold&& other) noexcept {
  if (this != &other) {
    release();
    held_ = other.held_;
    other.held_ = false;
  }
  return *this;
}

void Hdf5GateHold::hand_over() noexcept {
  if (!held_) return;
  std::lock_guard<std::mutex> lock(mutex);
  owner = std::thread::id();
}

void Hdf5GateHold::release() noexcept {
  if (!held_) return;
  held_ = false;
  {
    std::lock_guard<std::mutex> lock(mutex);
    gate_taken = false;
    owner = std::thread::id();
  }
  changed.notify_all();
}

}  // namespace h5dcp::detail
