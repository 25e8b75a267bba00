#include "api/checkpoint_session.hpp"

#include <atomic>
#include <cstdio>

#include "h5dcp/mpi_io.hpp"

namespace h5dcp::detail {

CheckpointSession::CheckpointSession(MPI_Comm comm, int coordinator, const std::string& path)
    : comm_(comm, coordinator) {
  comm_.require_same("checkpoint paths", path);
  static std::atomic<bool> warned{false};
  if (comm_.distributed() && comm_.is_coordinator() && ompio_may_be_in_use() && !warned.exchange(true))
    std::fprintf(stderr,
                 "h5dcp: warning: OpenMPI's OMPIO MPI-IO component may be in use; it has corrupted parallel HDF5 "
                 "data (open-mpi/ompi#12718). Run with OMPI_MCA_io=romio321 or call "
                 "h5dcp::prefer_romio_io_component() before MPI_Init.\n");
}

}  // namespace h5dcp::detail
