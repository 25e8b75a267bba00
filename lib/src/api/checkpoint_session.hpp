#pragma once
// What every public collective call sets up first: the HDF5 gate (one
// thread at a time in HDF5), HDF5's error printing silenced (its stack goes
// into our exceptions), the duplicated communicator, the agreement of every
// rank on the path and the options (before anything can wait on a rank that
// chose differently), and the one-time OMPIO warning.

#include <mpi.h>

#include <string>
#include <string_view>
#include <vector>

#include "comm/comm.hpp"
#include "h5dcp/options.hpp"
#include "hdf5/hdf5_access.hpp"

namespace h5dcp::detail {

/// The timeout an option asks for: itself when positive, none when
/// negative, $H5DCP_TIMEOUT_SECONDS or 1800 s when 0.
double resolve_timeout(double option);

/// Setting texts for the agreement of options across ranks.
std::string timeout_text(double resolved_seconds);  // "30", "0.5", "none"
std::string bool_text(bool value);                  // "true", "false"
std::string io_mode_text(IoMode mode);              // "collective", "independent"
std::string layout_text(LoadLayout layout);         // "whole", "sharded_dim0"

class CheckpointSession {
 public:
  /// Collective over `comm` (it duplicates it). Single-process without MPI.
  /// Throws UsageError on every rank when ranks passed different
  /// coordinators, paths, timeouts or `options` (named settings of
  /// `operation`, e.g. {"io_mode", "collective"}).
  CheckpointSession(MPI_Comm comm, int coordinator, std::string_view operation, const std::string& path,
                    double timeout_seconds, const std::vector<Setting>& options = {});

  const Comm& comm() const noexcept { return comm_; }

  /// Before a collective open of the file at the path: every rank checks
  /// that it sees an HDF5 file there, and a file some ranks cannot see ends
  /// on every rank with the same IoError naming them (Comm::require_visible).
  /// When no rank sees it, returns: the coordinator's read reports it.
  void require_readable_everywhere() const;
  /// Before a save: every rank checks that it sees the directory the file
  /// goes to (likewise).
  void require_directory_everywhere() const;

  /// An async save hands its session to its background thread, which
  /// finishes the save and destroys the session there (giving the gate
  /// back); the caller's thread may take the gate again meanwhile (and waits
  /// for it).
  void hand_over() noexcept { access_.hand_over(); }

 private:
  Hdf5Access access_;
  Comm comm_;
  std::string operation_;
  std::string path_;
};

}  // namespace h5dcp::detail
