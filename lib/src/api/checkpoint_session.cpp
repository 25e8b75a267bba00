#include "api/checkpoint_session.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "h5dcp/mpi_io.hpp"
#include "hdf5/hdf5_file.hpp"

namespace h5dcp::detail {

double resolve_timeout(double option) {
  if (option > 0) return option;
  if (option < 0) return 0;
  if (const char* env = std::getenv("H5DCP_TIMEOUT_SECONDS")) return std::atof(env);
  return 1800;
}

std::string timeout_text(double resolved_seconds) {
  if (resolved_seconds <= 0) return "none";
  std::ostringstream out;
  out << resolved_seconds;
  return out.str();
}

std::string bool_text(bool value) { return value ? "true" : "false"; }

std::string io_mode_text(IoMode mode) { return mode == IoMode::Collective ? "collective" : "independent"; }

std::string layout_text(LoadLayout layout) { return layout == LoadLayout::Whole ? "whole" : "sharded_dim0"; }

CheckpointSession::CheckpointSession(MPI_Comm comm, int coordinator, std::string_view operation,
                                     const std::string& path, double timeout_seconds,
                                     const std::vector<Setting>& options)
    : comm_(comm, coordinator), operation_(operation), path_(path) {
  // Agreed before the timeout is used: a rank with a deadline exchanges
  // arrival messages that a rank without one never sends.
  const double timeout = resolve_timeout(timeout_seconds);
  std::vector<Setting> settings{{"path", "'" + path + "'"}, {"timeout_seconds", timeout_text(timeout)}};
  settings.insert(settings.end(), options.begin(), options.end());
  comm_.require_same(operation, settings);
  comm_.set_timeout(timeout);
  static std::atomic<bool> warned{false};
  if (comm_.distributed() && comm_.is_coordinator() && ompio_may_be_in_use() && !warned.exchange(true))
    std::fprintf(stderr,
                 "h5dcp: warning: OpenMPI's OMPIO MPI-IO component may be in use; it has corrupted parallel HDF5 "
                 "data (open-mpi/ompi#12718). Run with OMPI_MCA_io=romio321 or call "
                 "h5dcp::prefer_romio_io_component() before MPI_Init.\n");
}

void CheckpointSession::require_readable_everywhere() const {
  comm_.require_visible(operation_, path_, [&] { check_hdf5_file(path_); });
}

void CheckpointSession::require_directory_everywhere() const {
  comm_.require_visible(operation_, path_, [&] { check_directory_of(path_); });
}

}  // namespace h5dcp::detail
