#include "bench_hdf5_floor.hpp"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>

namespace h5dcp_bench {
namespace {

void check(herr_t status, const char* what) {
  if (status < 0) throw std::runtime_error(std::string("HDF5 floor benchmark: ") + what + " failed");
}

hid_t checked(hid_t id, const char* what) {
  if (id < 0) throw std::runtime_error(std::string("HDF5 floor benchmark: ") + what + " failed");
  return id;
}

void string_attribute(hid_t object, const std::string& name, const char* value) {
  const hid_t type = checked(H5Tcopy(H5T_C_S1), "H5Tcopy");
  check(H5Tset_size(type, H5T_VARIABLE), "H5Tset_size");
  check(H5Tset_cset(type, H5T_CSET_UTF8), "H5Tset_cset");
  const hid_t space = checked(H5Screate(H5S_SCALAR), "H5Screate");
  const hid_t attr = checked(H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2");
  check(H5Awrite(attr, type, &value), "H5Awrite");
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
}

void int64_attribute(hid_t object, const std::string& name, const std::vector<std::int64_t>& values) {
  const hsize_t n = values.size();
  const hid_t space = checked(H5Screate_simple(1, &n, nullptr), "H5Screate_simple");
  const hid_t attr =
      checked(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), "H5Acreate2");
  check(H5Awrite(attr, H5T_NATIVE_INT64, values.data()), "H5Awrite");
  H5Aclose(attr);
  H5Sclose(space);
}

}  // namespace

double hdf5_many_datasets_seconds(const std::string& path, int count, std::int64_t elements, int attributes,
                                  MPI_Comm comm) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::vector<float> data(static_cast<std::size_t>(elements), 1.0f);
  MPI_Barrier(comm);
  const double started = MPI_Wtime();

  const hid_t fapl = checked(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
  check(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL), "H5Pset_fapl_mpio");
  check(H5Pset_coll_metadata_write(fapl, true), "H5Pset_coll_metadata_write");
  check(H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18), "H5Pset_libver_bounds");
  const hid_t file = checked(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "H5Fcreate");
  const hid_t dcpl = checked(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  check(H5Pset_layout(dcpl, H5D_CONTIGUOUS), "H5Pset_layout");
  check(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "H5Pset_fill_time");
  check(H5Pset_obj_track_times(dcpl, false), "H5Pset_obj_track_times");
  const hid_t dxpl = checked(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate");
  check(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_INDEPENDENT), "H5Pset_dxpl_mpio");
  const hsize_t dims = static_cast<hsize_t>(elements);
  const hid_t space = checked(H5Screate_simple(1, &dims, nullptr), "H5Screate_simple");

  std::vector<hid_t> datasets;
  for (int i = 0; i < count; ++i) {
    const std::string name = "/t" + std::to_string(i);
    const hid_t d =
        checked(H5Dcreate2(file, name.c_str(), H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), "H5Dcreate2");
    for (int a = 0; a < attributes && a < 7; ++a) {
      const std::string attr = "attribute" + std::to_string(a);
      if (a < 3)
        string_attribute(d, attr, "tensor");
      else
        int64_attribute(d, attr, {0, elements});
    }
    datasets.push_back(d);
  }
  for (int i = rank; i < count; i += size)
    check(H5Dwrite(datasets[static_cast<std::size_t>(i)], H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, dxpl, data.data()),
          "H5Dwrite");
  for (const hid_t d : datasets) H5Dclose(d);
  H5Sclose(space);
  H5Pclose(dxpl);
  H5Pclose(dcpl);
  check(H5Fclose(file), "H5Fclose");
  H5Pclose(fapl);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (!synced) throw std::runtime_error("HDF5 floor benchmark: fsync of " + path + " failed");

  double seconds = MPI_Wtime() - started;
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, comm);
  return seconds;
}

}  // namespace h5dcp_bench
