#pragma once
// Dataspaces for whole tensors and for the blocks ranks write or read.

#include "hdf5/handle.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

/// A dataspace of `shape`: scalar for a 0-d shape, simple otherwise.
Handle dataspace_of(const Shape& shape);

/// Selects `box` in `space` (a dataset's file space); for a 0-d dataset the
/// whole scalar. `fqn` names the tensor in errors.
void select_block(Hid space, const ChunkStorageMetadata& box, const std::string& fqn);

}  // namespace h5dcp::detail
