#pragma once
// The bytes of a checkpoint on disk, for the tests that damage one.

#include <cstdint>
#include <string>

namespace h5dcp::test {

/// The file offset of byte `byte` of the contiguous dataset `dataset`'s data
/// in the HDF5 file `file` (a test failure is recorded when it has none).
std::int64_t data_offset(const std::string& file, const std::string& dataset, std::int64_t byte);

/// Flips every bit of the byte at `offset` of `file` on rank 0; with MPI
/// running every rank calls it and waits (collective).
void flip_byte(const std::string& file, std::int64_t offset);

}  // namespace h5dcp::test
