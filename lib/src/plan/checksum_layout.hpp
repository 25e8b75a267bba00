#pragma once
// How blocks are cut into checksum slabs (pure arithmetic).
//
// Each saved chunk is cut along dim 0 into slabs of whole rows, so that a
// slab is one contiguous byte range of the chunk and one hyperslab of the
// dataset: any block a reader wants is verified by reading the slabs it
// touches. Slabs are about 1 MiB, larger for very large tensors so that a
// tensor has at most ~4,096 slabs (plus one per chunk).

#include <cstdint>
#include <vector>

#include "h5dcp/metadata.hpp"

namespace h5dcp::detail {

/// Rows of `chunk` per slab, for a tensor of `tensor_bytes` in all.
std::int64_t checksum_slab_rows(const ChunkStorageMetadata& chunk, std::int64_t element_size,
                                std::int64_t tensor_bytes);

/// The slabs of `chunk` with `rows` rows each (the last fewer), as boxes; a
/// 0-d chunk is one slab; a zero-volume chunk none.
std::vector<ChunkStorageMetadata> checksum_slabs(const ChunkStorageMetadata& chunk, std::int64_t rows);

/// The digests of one saved chunk, as the rank that wrote it computed them.
struct ChunkChecksums {
  std::uint32_t tensor = 0;  ///< index into the plan's tensors
  std::uint32_t chunk = 0;   ///< index into that tensor's chunks
  std::int64_t rows = 0;     ///< rows per slab
  std::vector<std::uint64_t> digests;
};

/// The checksums of one tensor, as stored: rows per slab for each chunk and
/// every slab's digest, chunk after chunk.
struct TensorChecksums {
  std::vector<std::int64_t> rows;
  std::vector<std::uint64_t> digests;
};

/// How many slabs checksum_slabs(chunk, rows) makes, computed without making
/// them (a damaged file may claim billions): 0 for a zero-volume chunk, 1 for
/// a 0-d one, else ceil(rows of the chunk / rows). `rows` must be positive.
std::int64_t checksum_slab_count(const ChunkStorageMetadata& chunk, std::int64_t rows);

/// Bytes of each slab checksum_slabs(chunk, rows) makes, in order, computed
/// without making the slabs (a save computes them for every block it writes,
/// in the time an async save's caller is blocked).
std::vector<std::int64_t> checksum_slab_bytes(const ChunkStorageMetadata& chunk, std::int64_t rows,
                                              std::int64_t element_size);

}  // namespace h5dcp::detail
