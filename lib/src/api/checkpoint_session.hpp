#pragma once
// What every public collective call sets up first: the HDF5 gate (one
// thread at a time in HDF5), HDF5's error printing silenced (its stack goes
// into our exceptions), the duplicated communicator, and the one-time OMPIO
// warning.

#include <mpi.h>

#include <string>

#include "comm/comm.hpp"
#include "hdf5/hdf5_access.hpp"

namespace h5dcp::detail {

/// The timeout an option asks for: itself when positive, none when
/// negative, $H5DCP_TIMEOUT_SECONDS or 1800 s when 0.
double resolve_timeout(double option);

class CheckpointSession {
 public:
  /// Collective over `comm` (it duplicates it). Single-process without MPI.
  /// Throws UsageError on every rank when ranks passed different
  /// coordinators or paths.
  CheckpointSession(MPI_Comm comm, int coordinator, const std::string& path, double timeout_seconds);

  const Comm& comm() const noexcept { return comm_; }

 private:
  Hdf5Access access_;
  Comm comm_;
};

}  // namespace h5dcp::detail
