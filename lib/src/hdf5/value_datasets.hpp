#pragma once
// Non-tensor values as small datasets (docs/FORMAT.md, "Non-tensor values"):
// each encoding has its natural HDF5 shape and type, and the encoded payload
// is exactly the dataset's bytes (strings: the UTF-8 text).

#include <hdf5.h>

#include <cstdint>
#include <string>

#include "hdf5/handle.hpp"

namespace h5dcp::detail {

/// Creates the dataset of a value (collective in parallel HDF5); throws
/// UsageError for an unknown encoding.
Handle create_value_dataset(hid_t parent, const std::string& name, hid_t lcpl, const std::string& encoding,
                            std::size_t payload_size);

/// Writes `payload` into a dataset made by create_value_dataset (by one rank).
void write_value(hid_t dataset, const std::string& encoding, const std::string& payload, hid_t dxpl,
                 const std::string& fqn);

/// Reads the payload of a value dataset; throws FormatError when its shape or
/// type does not fit `encoding`, or when it would take more than `max_bytes`
/// (what is left of the file's size: checked before allocating) or was never
/// written in full.
std::string read_value(hid_t dataset, const std::string& encoding, const std::string& fqn, std::int64_t max_bytes);

/// Throws FormatError naming `where` when `dataset` is contiguous (as h5dcp
/// writes every dataset) but stores fewer than `bytes` bytes: never written,
/// HDF5 would hand back fill values, or allocate them, for all of it.
void check_fully_stored(hid_t dataset, std::int64_t bytes, const std::string& where);

/// Throws FormatError naming `where` when the data of `dataset` is not in the
/// file itself: external storage (raw data in other files, by any path) or a
/// virtual dataset (mapped from other datasets, possibly of other files).
/// h5dcp writes neither, and reading one would read files that are not part
/// of the checkpoint (issue 48): checked before any of its data is read.
void require_data_in_file(hid_t dataset, const std::string& where);

}  // namespace h5dcp::detail
