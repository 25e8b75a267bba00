#pragma once
// Opening and creating container files: with the MPI-IO driver over a
// communicator (collective), or serially (sec2) when `comm` is MPI_COMM_NULL.

#include <mpi.h>

#include <string>

#include "hdf5/handle.hpp"

namespace h5dcp::detail {

/// Creates (truncates) `path`. Collective over `comm` unless it is MPI_COMM_NULL.
Handle create_file(const std::string& path, MPI_Comm comm);

/// The checks of `path` made before opening it: it exists, is a regular
/// file, and is HDF5. Local (no collective call: under MPI, agree on the
/// outcome before a collective open). Throws FormatError.
void check_hdf5_file(const std::string& path);

/// Throws IoError unless the directory `path` would be created in exists.
/// Local, like check_hdf5_file.
void check_directory_of(const std::string& path);

/// Opens `path` read-only. Collective over `comm` unless it is MPI_COMM_NULL.
/// Throws FormatError when `path` is missing or not an HDF5 file.
Handle open_file_read_only(const std::string& path, MPI_Comm comm);

/// Opens `path` for writing, serially (a node-local copy rewritten in place).
/// Throws FormatError when `path` is missing or not an HDF5 file.
Handle open_file_read_write(const std::string& path);

/// A dataset-transfer property list: MPI-IO collective or independent for
/// parallel files, the default for serial ones.
Handle transfer_properties(MPI_Comm comm, bool collective);

}  // namespace h5dcp::detail
