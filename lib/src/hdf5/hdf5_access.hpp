#pragma once
// What every h5dcp entry point that calls HDF5 holds for the duration: the
// process-wide gate (HDF5 is not thread-safe; see hdf5/hdf5_gate.hpp), then
// HDF5's error printing switched off (its stack goes into our exceptions).
// The switch is process-wide state of HDF5 too, so it is flipped only under
// the gate, and restored before the gate is given back.

#include "hdf5/hdf5_error.hpp"
#include "hdf5/hdf5_gate.hpp"

namespace h5dcp::detail {

class Hdf5Access {
 public:
  Hdf5Access() = default;
  Hdf5Access(const Hdf5Access&) = delete;
  Hdf5Access& operator=(const Hdf5Access&) = delete;

  /// The gate is being handed to another thread, which will destroy this
  /// access (see Hdf5GateHold::hand_over).
  void hand_over() noexcept { gate_.hand_over(); }

 private:
  Hdf5GateHold gate_;  // first taken, last given back
  SilenceHdf5Errors silence_;
};

}  // namespace h5dcp::detail
