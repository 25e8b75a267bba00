#pragma once
// HDF5 failures as h5dcp exceptions carrying HDF5's own error stack, and a
// scoped switch that keeps HDF5 from printing that stack to stderr itself.

#include <string>

#include "hdf5/handle.hpp"

namespace h5dcp::detail {

/// While alive, HDF5 prints nothing on errors (its stack goes into our
/// exceptions instead). Restores the previous setting when destroyed.
class SilenceHdf5Errors {
 public:
  SilenceHdf5Errors() noexcept;
  ~SilenceHdf5Errors();
  SilenceHdf5Errors(const SilenceHdf5Errors&) = delete;
  SilenceHdf5Errors& operator=(const SilenceHdf5Errors&) = delete;

 private:
  int (*previous_func_)(Hid, void*) = nullptr;  // H5E_auto2_t, without <hdf5.h>
  void* previous_data_ = nullptr;
};

/// Throws IoError: "h5dcp: <what> failed" plus HDF5's current error stack.
[[noreturn]] void throw_hdf5_error(const std::string& what);

/// Returns `id`, or throws when it is negative.
inline Hid check_id(Hid id, const std::string& what) {
  if (id < 0) throw_hdf5_error(what);
  return id;
}

/// Throws when `status` is negative.
inline void check_status(int status, const std::string& what) {
  if (status < 0) throw_hdf5_error(what);
}

}  // namespace h5dcp::detail
