#pragma once
// What a load reads to fill one block with verified bytes (pure geometry):
// the checksum slabs of the saved chunks the block overlaps, each read whole
// so its digest can be checked, and the part of each that goes into the
// block. api/verified_read.cpp only executes this.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "h5dcp/metadata.hpp"
#include "h5dcp/plan.hpp"
#include "plan/checksum_layout.hpp"

namespace h5dcp::detail {

/// One checksum slab to read and check.
struct SlabRead {
  std::size_t chunk = 0;      ///< the saved chunk (index into the tensor's chunks)
  ChunkStorageMetadata slab;  ///< the slab, in global coordinates: read whole
  std::size_t digest = 0;     ///< its digest: index into TensorChecksums::digests
  ChunkStorageMetadata part;  ///< the part of the slab the block wants, in global coordinates
  std::int64_t bytes = 0;     ///< the slab's bytes
};

struct SlabReadPlan {
  /// The block is one whole saved chunk and the destination takes the
  /// stored bytes as they are: read the chunk straight into it, a few slabs
  /// at a time, checking each where it lies (slabs are in order, each part ==
  /// its slab).
  bool in_place = false;
  std::vector<SlabRead> slabs;  ///< the slabs to read (or check), in order
  std::int64_t covered = 0;     ///< elements of the block the parts fill
};

/// The slabs that fill `item`'s block (its storage box) from the saved
/// chunks it names. `in_place_possible`: the destination is contiguous host
/// memory of the stored dtype. The parts fill the block exactly unless the
/// saved chunks overlap (a damaged file): the reader compares `covered`
/// with the block's volume.
SlabReadPlan plan_slab_reads(const ReadItem& item, const TensorStorageMetadata& storage,
                             const TensorChecksums& checksums, bool in_place_possible);

}  // namespace h5dcp::detail
