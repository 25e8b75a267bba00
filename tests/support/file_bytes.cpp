#include "file_bytes.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

namespace h5dcp::test {

std::int64_t data_offset(const std::string& file, const std::string& dataset, std::int64_t byte) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const auto offset = static_cast<std::int64_t>(H5Dget_offset(d));
  H5Dclose(d);
  H5Fclose(f);
  EXPECT_NE(static_cast<haddr_t>(offset), HADDR_UNDEF)
      << "'" << dataset << "' of '" << file << "' has no contiguous data";
  return offset + byte;
}

void flip_byte(const std::string& file, std::int64_t offset) {
  int initialized = 0;
  int rank = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    const int fd = ::open(file.c_str(), O_RDWR);
    unsigned char b = 0;
    EXPECT_EQ(::pread(fd, &b, 1, offset), 1);
    b = static_cast<unsigned char>(~b);
    EXPECT_EQ(::pwrite(fd, &b, 1, offset), 1);
    ::close(fd);
  }
  if (initialized) MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace h5dcp::test
