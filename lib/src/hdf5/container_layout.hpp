#pragma once
// Names of the container format v1 (docs/FORMAT.md is the reference).

namespace h5dcp::detail::layout {

// Root group attributes.
inline constexpr const char* kFormatVersion = "h5dcp.format_version";  // int64[2]: major, minor
inline constexpr const char* kLibraryVersion = "h5dcp.library_version";
inline constexpr const char* kWorldSize = "h5dcp.world_size";  // int64[1]
inline constexpr const char* kCreated = "h5dcp.created";       // ISO-8601 UTC

// Tensor dataset attributes.
inline constexpr const char* kKey = "h5dcp.key";        // the state-dict key, unescaped (UTF-8)
inline constexpr const char* kDType = "h5dcp.dtype";    // torch dtype name
inline constexpr const char* kChunkOffsets = "h5dcp.chunk_offsets";  // int64[chunks, ndim]
inline constexpr const char* kChunkSizes = "h5dcp.chunk_sizes";      // int64[chunks, ndim]

}  // namespace h5dcp::detail::layout
