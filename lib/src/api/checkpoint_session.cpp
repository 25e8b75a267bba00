#include "api/checkpoint_session.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "h5dcp/mpi_io.hpp"

namespace h5dcp::detail {

double resolve_timeout(double option) {
  if (option > 0) return option;
  if (option < 0) return 0;
  if (const char* env = std::getenv("H5DCP_TIMEOUT_SECONDS")) return std::atof(env);
  return 1800;
}

CheckpointSession::CheckpointSession(MPI_Comm comm, int coordinator, const std::string& path, double timeout_seconds)
    : comm_(comm, coordinator) {
  comm_.require_same("checkpoint paths", path);
  comm_.set_timeout(resolve_timeout(timeout_seconds));
  static std::atomic<bool> warned{false};
  if (comm_.distributed() && comm_.is_coordinator() && ompio_may_be_in_use() && !warned.exchange(true))
    std::fprintf(stderr,
                 "h5dcp: warning: OpenMPI's OMPIO MPI-IO component may be in use; it has corrupted parallel HDF5 "
                 "data (open-mpi/ompi#12718). Run with OMPI_MCA_io=romio321 or call "
                 "h5dcp::prefer_romio_io_component() before MPI_Init.\n");
}

}  // namespace h5dcp::detail
