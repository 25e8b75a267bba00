#pragma once
// One thread at a time in HDF5. Debian's parallel HDF5 (like most parallel
// builds) is not thread-safe, and an async save writes from a background
// thread while the caller may read another checkpoint: every h5dcp entry
// point that makes HDF5 calls (save, load, the readers, verify, the
// conversions, file-kind detection) holds the process-wide gate while it
// does. An async save takes it in the caller's thread (so every rank takes it
// in the same collective order, and no cross-rank wait can form a cycle) and
// hands it to its background thread, which gives it back when the save is
// done; hence a gate, not a mutex.

namespace h5dcp::detail {

/// Holds the gate while alive: blocks until no other holder exists. Move-only,
/// so a hold can be handed to the job that finishes the work (an async save's
/// background thread); whatever happens before the hand-over, the gate is
/// given back when the hold dies.
class Hdf5GateHold {
 public:
  /// Waits for the gate. Throws UsageError when this thread holds it already
  /// (an h5dcp call from inside another, e.g. from a planner or a progress
  /// callback): it would wait for itself forever.
  Hdf5GateHold();
  ~Hdf5GateHold();
  Hdf5GateHold(Hdf5GateHold&& other) noexcept;
  Hdf5GateHold& operator=(Hdf5GateHold&& other) noexcept;
  Hdf5GateHold(const Hdf5GateHold&) = delete;
  Hdf5GateHold& operator=(const Hdf5GateHold&) = delete;

  /// The hold now belongs to no thread in particular (it is being handed to
  /// another): the thread that took it may wait for the gate again.
  void hand_over() noexcept;
  /// Gives the gate back now (no-op when this hold is empty).
  void release() noexcept;
  bool held() const noexcept { return held_; }

 private:
  bool held_ = false;
};

}  // namespace h5dcp::detail
