#pragma once
// Choosing the MPI-IO component.
//
// OpenMPI 4.1's default MPI-IO component, OMPIO, has corrupted parallel HDF5
// data on local file systems (open-mpi/ompi#12718, fixed after 4.1.4, the
// version Debian 12 ships). ROMIO does not. h5dcp's programs and tests run
// under ROMIO; library users should too, on affected OpenMPI versions.

namespace h5dcp {

/// Makes OpenMPI select ROMIO (`OMPI_MCA_io=romio321`) unless the user chose a
/// component already. Call it before MPI_Init; it only sets an environment
/// variable, so it is not collective and works with any MPI (others ignore it).
void prefer_romio_io_component();

/// True when the running MPI is OpenMPI and its MPI-IO component was not
/// chosen as ROMIO: save and load print a one-time warning in that case.
/// Not collective.
bool ompio_may_be_in_use();

}  // namespace h5dcp
