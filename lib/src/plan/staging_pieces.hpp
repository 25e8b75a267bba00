#pragma once
// Splitting blocks into pieces that fit a staging buffer (async saves).

#include <cstdint>
#include <vector>

#include "h5dcp/metadata.hpp"

namespace h5dcp::detail {

/// Splits `box` into sub-blocks of at most `max_bytes` each (elements of
/// `element_size` bytes), in row-major order: trailing dimensions stay whole
/// as long as they fit, the outermost dimension that does not fit is cut
/// into runs, and the dimensions before it into single indices. A block that
/// fits is one piece; a zero-volume block is none. `max_bytes` must be at
/// least `element_size`.
std::vector<ChunkStorageMetadata> split_block(const ChunkStorageMetadata& box, std::int64_t element_size,
                                              std::int64_t max_bytes);

}  // namespace h5dcp::detail
