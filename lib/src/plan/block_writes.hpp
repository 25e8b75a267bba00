#pragma once
// What the global save plan asks of one rank: the blocks it writes, in the
// order every writer walks them, each with the checksum slabs its bytes are
// hashed in, and (for an async save) the pieces those blocks stream through
// staging memory in. save() and the async save only execute this.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/checksum.hpp"
#include "h5dcp/plan.hpp"
#include "plan/checksum_layout.hpp"

namespace h5dcp::detail {

/// One block a rank writes: chunk `chunk` of plan tensor `tensor`.
struct BlockWrite {
  std::size_t tensor = 0;                ///< index into plan.tensors
  std::size_t chunk = 0;                 ///< index into that tensor's chunks
  std::int64_t bytes = 0;                ///< the block's bytes
  std::int64_t slab_rows = 0;            ///< rows per checksum slab
  std::vector<std::int64_t> slab_bytes;  ///< bytes of each checksum slab, in order
};

/// Block `chunk` of tensor `tensor` of `plan`, with its checksum slabs.
BlockWrite block_write(const GlobalSavePlan& plan, std::size_t tensor, std::size_t chunk);

/// Every block `rank` writes, tensor by tensor in plan order (zero-volume
/// blocks included: they have no slabs and no bytes).
std::vector<BlockWrite> blocks_written_by(const GlobalSavePlan& plan, int rank);

/// The bytes of every block each rank writes (index: rank), in the order
/// blocks_written_by gives them, zero-volume blocks included: one pass over
/// the plan, with no slab layout, for the checks that need only sizes.
std::vector<std::vector<std::int64_t>> block_bytes_by_rank(const GlobalSavePlan& plan);

/// A hasher fed with the block's bytes in order, slab after slab.
SlabHasher block_hasher(const BlockWrite& block);

/// The checksums of a block whose bytes are all at `bytes` (contiguous).
ChunkChecksums checksum_block(const BlockWrite& block, const void* bytes);

/// The checksums a block's hasher made once fed every byte.
ChunkChecksums block_checksums(const BlockWrite& block, const SlabHasher& hasher);

/// A piece of a block on its way through staging memory.
struct StagingPiece {
  std::size_t block = 0;     ///< index into the rank's blocks
  ChunkStorageMetadata box;  ///< the piece, in global coordinates
  std::int64_t bytes = 0;
};

/// The blocks cut into pieces of at most `max_bytes` (split_block), in
/// order; a block that fits is one piece, a zero-volume block none.
std::vector<StagingPiece> staging_pieces(const GlobalSavePlan& plan, const std::vector<BlockWrite>& blocks,
                                         std::int64_t max_bytes);

}  // namespace h5dcp::detail
