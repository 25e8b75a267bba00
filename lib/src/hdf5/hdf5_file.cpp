#include "hdf5/hdf5_file.hpp"

#include <hdf5.h>

#include <sys/stat.h>

#include "h5dcp/error.hpp"
#include "hdf5/hdf5_error.hpp"

namespace h5dcp::detail {
namespace {

Handle file_access(MPI_Comm comm, bool writing) {
  Handle fapl(check_id(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate"), H5Pclose);
  if (comm != MPI_COMM_NULL) {
    check_status(H5Pset_fapl_mpio(fapl.get(), comm, MPI_INFO_NULL), "H5Pset_fapl_mpio");
    // Collective metadata writes let HDF5 write metadata from few ranks at
    // once. Collective metadata *reads* stay off: buggy in HDF5 1.10.5-1.10.8.
    if (writing) check_status(H5Pset_coll_metadata_write(fapl.get(), true), "H5Pset_coll_metadata_write");
  }
  // The 1.8 file format: dense attribute storage, so a tensor's checksum list
  // may exceed 64 KiB. Readable by HDF5 1.8 and later, h5py included.
  if (writing) check_status(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_V18), "H5Pset_libver_bounds");
  return fapl;
}

}  // namespace

Handle create_file(const std::string& path, MPI_Comm comm) {
  const auto fapl = file_access(comm, true);
  return Handle(check_id(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), "creating '" + path + "'"),
                H5Fclose);
}

void check_hdf5_file(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw FormatError("h5dcp: no checkpoint at '" + path + "' (no such file)");
  if (!S_ISREG(info.st_mode)) throw FormatError("h5dcp: '" + path + "' is not a regular file");
  if (H5Fis_hdf5(path.c_str()) <= 0)
    throw FormatError("h5dcp: '" + path + "' is not an HDF5 file (empty, truncated, or another format)");
}

void check_directory_of(const std::string& path) {
  const auto slash = path.rfind('/');
  const auto directory = slash == std::string::npos ? std::string(".")
                         : slash == 0               ? std::string("/")
                                                    : path.substr(0, slash);
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    throw IoError("h5dcp: no directory '" + directory + "' for '" + path + "'");
}

Handle open_file_read_only(const std::string& path, MPI_Comm comm) {
  check_hdf5_file(path);
  const auto fapl = file_access(comm, false);
  return Handle(check_id(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), "opening '" + path + "'"), H5Fclose);
}

Handle open_file_read_write(const std::string& path) {
  check_hdf5_file(path);
  const auto fapl = file_access(MPI_COMM_NULL, true);
  return Handle(check_id(H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl.get()), "opening '" + path + "' to write"), H5Fclose);
}

Handle transfer_properties(MPI_Comm comm, bool collective) {
  Handle dxpl(check_id(H5Pcreate(H5P_DATASET_XFER), "H5Pcreate"), H5Pclose);
  if (comm != MPI_COMM_NULL)
    check_status(H5Pset_dxpl_mpio(dxpl.get(), collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT),
                 "H5Pset_dxpl_mpio");
  return dxpl;
}

}  // namespace h5dcp::detail
