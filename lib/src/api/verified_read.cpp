#include "api/verified_read.hpp"

#include <cstddef>
#include <sstream>
#include <vector>

#include "base/checksum.hpp"
#include "h5dcp/error.hpp"
#include "plan/broadcast_buckets.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/slab_reads.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/tensor_blocks.hpp"

namespace h5dcp::detail {
namespace {

[[noreturn]] void mismatch(const ReadItem& item, std::size_t chunk, const ChunkStorageMetadata& slab,
                           std::uint64_t expected, std::uint64_t got) {
  std::ostringstream out;
  out << "h5dcp: checksum mismatch in '" << item.storage_fqn << "', saved chunk " << chunk << ", slab "
      << describe_box(slab) << " (stored " << std::hex << expected << ", read " << got
      << "): the checkpoint is damaged";
  throw FormatError(out.str());
}

// How many bytes of consecutive slabs one read of an in-place block takes
// before they are checked (grouped by assign_buckets: a larger slab alone):
// about what stays in a core's L2 cache. In h5dcp-bench's warm load of 1 GiB
// on this machine, reads of 1-2 MiB took the load from 0.18 s to 0.145 s
// against one read per 128 MiB block; cold loads were unchanged.
constexpr std::size_t kInCacheReadBytes = std::size_t{1} << 20;

}  // namespace

void read_verified(ContainerReader& reader, const ReadItem& item, const at::Tensor& block,
                   const TensorStorageMetadata& storage, const TensorChecksums& checksums) {
  HostToDevice uploads{CallerWork(std::vector<at::Tensor>{block})};
  read_verified(reader, item, block, storage, checksums, uploads);
  uploads.finish();
}

void read_verified(ContainerReader& reader, const ReadItem& item, const at::Tensor& block,
                   const TensorStorageMetadata& storage, const TensorChecksums& checksums, HostToDevice& uploads) {
  const auto stored = to_scalar_type(item.dtype);
  const ChunkStorageMetadata box{item.storage_offsets, item.lengths};
  const bool takes_bytes = block.device().is_cpu() && block.is_contiguous() && block.scalar_type() == stored;
  // A tensor saved whole in one slab (every small one), read whole into
  // place: one read and one digest, nothing to plan.
  if (takes_bytes && storage.chunks.size() == 1 && item.source_chunks.size() == 1 && storage.chunks[0] == box &&
      checksums.rows.size() == 1 && checksums.rows[0] > 0 && checksums.digests.size() == 1 && !box.sizes.empty() &&
      checksum_slab_count(box, checksums.rows[0]) == 1) {
    auto* bytes = block.data_ptr();
    reader.read(item.storage_fqn, item.dtype, box, bytes);
    const auto got = checksum(bytes, static_cast<std::size_t>(volume(box.sizes)) * dtype_size(item.dtype));
    if (got != checksums.digests[0]) mismatch(item, 0, box, checksums.digests[0], got);
    return;
  }
  const auto plan = plan_slab_reads(item, storage, checksums, takes_bytes);
  auto verify = [&](const SlabRead& read, const void* bytes) {
    const auto got = checksum(bytes, static_cast<std::size_t>(read.bytes));
    if (got != checksums.digests[read.digest])
      mismatch(item, read.chunk, read.slab, checksums.digests[read.digest], got);
  };

  if (plan.in_place) {
    // The block is one saved chunk: read it straight into place, a few
    // slabs at a time, and check them while they are still in the core's
    // cache (a whole block read first would have the checksums fetch every
    // byte from memory a second time).
    auto* bytes = static_cast<char*>(block.data_ptr());
    const auto& slabs = plan.slabs;
    if (slabs.size() <= 1) {  // nothing to group (a small or 0-d block): no allocations
      reader.read(item.storage_fqn, item.dtype, box, bytes);
      for (const auto& read : slabs) verify(read, bytes);
      return;
    }
    std::vector<BucketItem> sizes;
    sizes.reserve(slabs.size());
    for (const auto& read : slabs) sizes.push_back({0, static_cast<std::size_t>(read.bytes)});
    for (const auto& group : assign_buckets(sizes, kInCacheReadBytes)) {
      // Slabs are whole rows of the chunk, in order: the group is rows
      // [first's start, last's end) of the block.
      ChunkStorageMetadata rows = slabs[group.front()].slab;
      const auto& last = slabs[group.back()].slab;
      rows.sizes[0] = last.offsets[0] + last.sizes[0] - rows.offsets[0];
      reader.read(item.storage_fqn, item.dtype, rows, bytes);
      for (const auto k : group) {
        verify(slabs[k], bytes);
        bytes += slabs[k].bytes;
      }
    }
    return;
  }

  // Otherwise every slab is read whole, checked, and its wanted part copied
  // out.
  for (const auto& read : plan.slabs) {
    auto buffer = uploads.buffer(read.slab.sizes, stored, block);
    reader.read(item.storage_fqn, item.dtype, read.slab, buffer.data_ptr());
    verify(read, buffer.data_ptr());
    uploads.copy(narrowed(buffer, minus(read.part.offsets, read.slab.offsets), read.part.sizes),
                 narrowed(block, minus(read.part.offsets, box.offsets), read.part.sizes));
  }
  // The parts must fill the block: a planner that let overlapping chunks
  // through would leave elements of it unread.
  if (plan.covered != volume(box.sizes))
    throw FormatError("h5dcp: the saved chunks of '" + item.storage_fqn + "' fill " + std::to_string(plan.covered) +
                      " of the " + std::to_string(volume(box.sizes)) + " elements of the block " + describe_box(box) +
                      " (overlapping chunks): the checkpoint's chunk attributes are damaged");
}

}  // namespace h5dcp::detail
