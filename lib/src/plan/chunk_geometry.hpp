#pragma once
// N-d block arithmetic shared by save validation and load planning.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "h5dcp/metadata.hpp"

namespace h5dcp::detail {

using Shape = std::vector<std::int64_t>;

/// Number of elements of a shape (1 for a 0-d shape).
std::int64_t volume(const Shape& sizes);

/// The intersection of two boxes of the same rank, or nullopt when it is
/// empty.
std::optional<ChunkStorageMetadata> intersect(const ChunkStorageMetadata& a, const ChunkStorageMetadata& b);

/// Whether `box`, inside a row-major array of shape `global`, is one
/// contiguous range of its elements: every dimension after the first one it
/// cuts is whole, every dimension before it has size 1 (row blocks are; a
/// column block of a matrix with several rows is not). Empty boxes are.
bool is_contiguous_in(const ChunkStorageMetadata& box, const Shape& global);

/// "[0:4, 2:6]" — half-open ranges per dimension, for error messages.
std::string describe_box(const ChunkStorageMetadata& box);

/// "[4, 6]".
std::string describe_shape(const Shape& shape);

/// Checks that `chunks` (all of rank `global.size()`, inside `global`) tile
/// `global` exactly: no two overlap and together they cover every element.
/// Throws UsageError naming `fqn` and the overlapping boxes or an uncovered
/// element. `chunks` are unique (duplicates were merged by the caller).
void check_exact_tiling(const std::string& fqn, const Shape& global, const std::vector<ChunkStorageMetadata>& chunks);

}  // namespace h5dcp::detail
