#pragma once
// What HDF5 itself costs for many small datasets, without h5dcp: the floor
// under h5dcp's "5,000 small tensors" case (h5dcp-bench prints it beside).

#include <mpi.h>

#include <cstdint>
#include <string>

namespace h5dcp_bench {

/// Seconds (slowest rank) to create a parallel HDF5 file with h5dcp's file
/// settings (1.8 format, collective metadata writes, contiguous datasets,
/// no fill, no times), `count` float32 datasets of `elements` each with
/// `attributes` small attributes written at creation (at most 7: three
/// strings, then int64 arrays), each rank writing every size-th dataset's
/// data independently, close, and fsync from every rank. Collective.
double hdf5_many_datasets_seconds(const std::string& path, int count, std::int64_t elements, int attributes,
                                  MPI_Comm comm);

}  // namespace h5dcp_bench
