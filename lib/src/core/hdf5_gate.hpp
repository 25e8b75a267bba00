#pragma once
// One thread at a time in HDF5. Debian's parallel HDF5 (like most parallel
// builds) is not thread-safe, and an async save writes from a background
// thread while the caller may start a load: every h5dcp operation holds the
// process-wide gate while it makes HDF5 calls. An async save takes it in the
// caller's thread (so every rank takes it in the same collective order, and
// no cross-rank wait can form a cycle) and its background thread gives it
// back when the save is done; hence a gate, not a mutex.

namespace h5dcp::detail {

class Hdf5Gate {
 public:
  /// Blocks until no other operation holds the gate, then holds it.
  static void acquire();
  /// Gives the gate back (from any thread).
  static void release();
};

/// Holds the gate for a scope.
class Hdf5GateHold {
 public:
  Hdf5GateHold() { Hdf5Gate::acquire(); }
  ~Hdf5GateHold() { Hdf5Gate::release(); }
  Hdf5GateHold(const Hdf5GateHold&) = delete;
  Hdf5GateHold& operator=(const Hdf5GateHold&) = delete;
};

}  // namespace h5dcp::detail
