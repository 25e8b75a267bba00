#pragma once
// N-d block arithmetic shared by save validation and load planning.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "h5dcp/metadata.hpp"

namespace h5dcp::detail {

using Shape = std::vector<std::int64_t>;

/// Number of elements of a shape (1 for a 0-d shape). Throws UsageError when
/// it does not fit in 64 bits (shapes read from files are checked with
/// checked_volume first, which names the file).
std::int64_t volume(const Shape& sizes);

/// The number of elements, or nullopt when a size is negative or the product
/// overflows int64 (0 whenever a size is 0, whatever the others).
std::optional<std::int64_t> checked_volume(const Shape& sizes);

/// volume × element_size, or nullopt when negative or it overflows int64.
std::optional<std::int64_t> checked_bytes(const Shape& sizes, std::int64_t element_size);

/// The intersection of two boxes of the same rank, or nullopt when it is
/// empty.
std::optional<ChunkStorageMetadata> intersect(const ChunkStorageMetadata& a, const ChunkStorageMetadata& b);

/// a - b, dimension by dimension: an offset made relative to the origin `b`
/// of a box that contains it.
Shape minus(const Shape& a, const Shape& b);

/// Whether `box`, inside a row-major array of shape `global`, is one
/// contiguous range of its elements: every dimension after the first one it
/// cuts is whole, every dimension before it has size 1 (row blocks are; a
/// column block of a matrix with several rows is not). Empty boxes are.
bool is_contiguous_in(const ChunkStorageMetadata& box, const Shape& global);

/// The strides (in elements) of a row-major contiguous tensor of `sizes`;
/// dimensions of size 0 count as 1, as PyTorch's contiguous strides do.
Shape contiguous_strides(const Shape& sizes);

/// The position (in elements) of the element at index `at` of a tensor laid
/// out with `strides` (contiguous_strides for a row-major one).
std::int64_t linear_offset(const Shape& at, const Shape& strides);

/// Whether `inner` lies inside `outer` (boxes of the same tensor).
bool contains(const ChunkStorageMetadata& outer, const ChunkStorageMetadata& inner);

/// "[0:4, 2:6]" — half-open ranges per dimension, for error messages.
std::string describe_box(const ChunkStorageMetadata& box);

/// "[4, 6]".
std::string describe_shape(const Shape& shape);

/// Checks that `chunks` (all of rank `global.size()`, inside `global`) tile
/// `global` exactly: no two overlap and together they cover every element.
/// Throws UsageError naming `fqn` and the overlapping boxes or an uncovered
/// element. `chunks` are unique (duplicates were merged by the caller).
void check_exact_tiling(const std::string& fqn, const Shape& global, const std::vector<ChunkStorageMetadata>& chunks);

/// The chunks' bounds in one flat array, for loops that test many boxes
/// against each other: chunk i, dimension d, [start, end) at
/// bounds[2 * (i * dims + d)]. A box of two vectors costs two pointer
/// chases per test, and a million chunks are a million scattered blocks.
/// Every chunk must have `dims` offsets and sizes.
std::vector<std::int64_t> flat_bounds(const std::vector<ChunkStorageMetadata>& chunks, std::size_t dims);

/// The first two of `chunks` (all of one rank) that overlap, described
/// ("shards of 'w' overlap: [0:2] and [1:3]"), or nullopt when none do.
std::optional<std::string> find_overlap(const std::string& fqn, const std::vector<ChunkStorageMetadata>& chunks);

/// The same check, for chunks read from a file (where a duplicate is an
/// overlap): what is wrong ("shards of 'w' overlap: [0:2] and [1:3]"), or
/// nullopt when they tile `global` exactly.
std::optional<std::string> tiling_problem(const std::string& fqn, const Shape& global,
                                          const std::vector<ChunkStorageMetadata>& chunks);

}  // namespace h5dcp::detail
