#include "plan/block_writes.hpp"

#include <algorithm>

#include "h5dcp/dtype.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/staging_pieces.hpp"

namespace h5dcp::detail {

BlockWrite block_write(const GlobalSavePlan& plan, std::size_t tensor, std::size_t chunk) {
  const auto& t = plan.tensors.at(tensor);
  const auto& box = t.chunks.at(chunk).chunk;
  const auto element = static_cast<std::int64_t>(dtype_size(t.dtype));
  BlockWrite block;
  block.tensor = tensor;
  block.chunk = chunk;
  block.bytes = volume(box.sizes) * element;
  // Slab size depends on the whole tensor's size (see checksum_layout.hpp):
  // every writer of a tensor cuts its blocks the same way.
  block.slab_rows = checksum_slab_rows(box, element, volume(t.global_shape) * element);
  block.slab_bytes = checksum_slab_bytes(box, block.slab_rows, element);
  return block;
}

std::vector<BlockWrite> blocks_written_by(const GlobalSavePlan& plan, int rank) {
  std::vector<BlockWrite> blocks;
  for (std::size_t t = 0; t < plan.tensors.size(); ++t)
    for (std::size_t k = 0; k < plan.tensors[t].chunks.size(); ++k)
      if (plan.tensors[t].chunks[k].writer == rank) blocks.push_back(block_write(plan, t, k));
  return blocks;
}

std::vector<std::vector<std::int64_t>> block_bytes_by_rank(const GlobalSavePlan& plan) {
  std::vector<std::vector<std::int64_t>> bytes(static_cast<std::size_t>(std::max(plan.world_size, 0)));
  for (const auto& t : plan.tensors) {
    const auto element = static_cast<std::int64_t>(dtype_size(t.dtype));
    for (const auto& c : t.chunks)
      if (c.writer >= 0 && c.writer < plan.world_size)
        bytes[static_cast<std::size_t>(c.writer)].push_back(volume(c.chunk.sizes) * element);
  }
  return bytes;
}

SlabHasher block_hasher(const BlockWrite& block) { return SlabHasher(block.slab_bytes); }

ChunkChecksums block_checksums(const BlockWrite& block, const SlabHasher& hasher) {
  return {static_cast<std::uint32_t>(block.tensor), static_cast<std::uint32_t>(block.chunk), block.slab_rows,
          hasher.digests()};
}

ChunkChecksums checksum_block(const BlockWrite& block, const void* bytes) {
  auto hasher = block_hasher(block);
  hasher.update(bytes, block.bytes);
  return block_checksums(block, hasher);
}

std::vector<StagingPiece> staging_pieces(const GlobalSavePlan& plan, const std::vector<BlockWrite>& blocks,
                                         std::int64_t max_bytes) {
  std::vector<StagingPiece> pieces;
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const auto& t = plan.tensors.at(blocks[b].tensor);
    const auto element = static_cast<std::int64_t>(dtype_size(t.dtype));
    for (auto& box : split_block(t.chunks.at(blocks[b].chunk).chunk, element, max_bytes))
      pieces.push_back(StagingPiece{b, box, volume(box.sizes) * element});
  }
  return pieces;
}

}  // namespace h5dcp::detail
