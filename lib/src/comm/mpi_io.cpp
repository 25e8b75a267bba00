#include "h5dcp/mpi_io.hpp"

#include <mpi.h>

#include <cstdlib>
#include <string>

namespace h5dcp {

void prefer_romio_io_component() { ::setenv("OMPI_MCA_io", "romio321", /*overwrite=*/0); }

bool ompio_may_be_in_use() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(version, &length) != MPI_SUCCESS) return false;
  if (std::string(version, static_cast<std::size_t>(length)).find("Open MPI") == std::string::npos) return false;
  const char* chosen = std::getenv("OMPI_MCA_io");
  return chosen == nullptr || std::string(chosen).find("romio") == std::string::npos;
}

}  // namespace h5dcp
