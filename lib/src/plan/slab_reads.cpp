#include "plan/slab_reads.hpp"

#include <optional>

#include "h5dcp/dtype.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

SlabReadPlan plan_slab_reads(const ReadItem& item, const TensorStorageMetadata& storage,
                             const TensorChecksums& checksums, bool in_place_possible) {
  const auto element = static_cast<std::int64_t>(dtype_size(item.dtype));
  const ChunkStorageMetadata box{item.storage_offsets, item.lengths};
  // Where each chunk's digests start in the flat list.
  std::vector<std::size_t> first_digest(storage.chunks.size() + 1, 0);
  for (std::size_t c = 0; c < storage.chunks.size(); ++c)
    first_digest[c + 1] =
        first_digest[c] + static_cast<std::size_t>(volume(storage.chunks[c].sizes) == 0
                                                       ? 0
                                                       : checksum_slab_count(storage.chunks[c], checksums.rows[c]));
  SlabReadPlan plan;
  plan.in_place = in_place_possible && item.source_chunks.size() == 1 && storage.chunks[item.source_chunks[0]] == box;
  for (const auto c : item.source_chunks) {
    const auto& chunk = storage.chunks[c];
    // A 0-d block is its one chunk; otherwise the part of the chunk wanted.
    const auto wanted = box.sizes.empty() ? std::optional<ChunkStorageMetadata>(chunk) : intersect(box, chunk);
    if (!wanted) continue;
    std::size_t digest = first_digest[c];
    for (const auto& slab : checksum_slabs(chunk, checksums.rows[c])) {
      const auto part = slab.sizes.empty() ? std::optional<ChunkStorageMetadata>(slab) : intersect(*wanted, slab);
      if (part) {
        plan.slabs.push_back(SlabRead{c, slab, digest, *part, volume(slab.sizes) * element});
        plan.covered += volume(part->sizes);
      }
      ++digest;
    }
  }
  return plan;
}

}  // namespace h5dcp::detail
