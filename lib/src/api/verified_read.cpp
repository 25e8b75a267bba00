#include "api/verified_read.hpp"

#include <ATen/ops/empty.h>

#include <sstream>

#include "base/checksum.hpp"
#include "h5dcp/error.hpp"
#include "plan/checksum_layout.hpp"
#include "plan/chunk_geometry.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/tensor_blocks.hpp"

namespace h5dcp::detail {
namespace {

Shape minus(const Shape& a, const Shape& b) {
  Shape out(a.size());
  for (std::size_t d = 0; d < a.size(); ++d) out[d] = a[d] - b[d];
  return out;
}

[[noreturn]] void mismatch(const ReadItem& item, std::size_t chunk, const ChunkStorageMetadata& slab,
                           std::uint64_t expected, std::uint64_t got) {
  std::ostringstream out;
  out << "h5dcp: checksum mismatch in '" << item.storage_fqn << "', saved chunk " << chunk << ", slab "
      << describe_box(slab) << " (stored " << std::hex << expected << ", read " << got
      << "): the checkpoint is damaged";
  throw FormatError(out.str());
}

}  // namespace

void read_verified(ContainerReader& reader, const ReadItem& item, const at::Tensor& block,
                   const TensorStorageMetadata& storage, const TensorChecksums& checksums) {
  const auto stored = to_scalar_type(item.dtype);
  const auto element = static_cast<std::int64_t>(dtype_size(item.dtype));
  const ChunkStorageMetadata box{item.storage_offsets, item.lengths};
  // Where each chunk's digests start in the flat list.
  std::vector<std::size_t> first_digest(storage.chunks.size() + 1, 0);
  for (std::size_t c = 0; c < storage.chunks.size(); ++c)
    first_digest[c + 1] =
        first_digest[c] + static_cast<std::size_t>(volume(storage.chunks[c].sizes) == 0
                                                       ? 0
                                                       : checksum_slab_count(storage.chunks[c], checksums.rows[c]));

  // The block is exactly one saved chunk and can be read in place: read it,
  // then check its slabs where they lie.
  if (item.source_chunks.size() == 1 && storage.chunks[item.source_chunks[0]] == box && block.device().is_cpu() &&
      block.is_contiguous() && block.scalar_type() == stored) {
    const auto c = item.source_chunks[0];
    reader.read(item.storage_fqn, item.dtype, box, block.data_ptr());
    const auto* bytes = static_cast<const char*>(block.data_ptr());
    std::size_t digest = first_digest[c];
    for (const auto& slab : checksum_slabs(box, checksums.rows[c])) {
      const auto n = volume(slab.sizes) * element;
      const auto got = checksum(bytes, static_cast<std::size_t>(n));
      if (got != checksums.digests[digest]) mismatch(item, c, slab, checksums.digests[digest], got);
      bytes += n;
      ++digest;
    }
    return;
  }

  // Otherwise every slab the block touches is read whole, checked, and its
  // wanted part copied out. The parts must fill the block: a planner that let
  // overlapping chunks through would leave elements of it unread.
  std::int64_t copied = 0;
  for (const auto c : item.source_chunks) {
    const auto& chunk = storage.chunks[c];
    const auto wanted = box.sizes.empty() ? std::optional<ChunkStorageMetadata>(chunk) : intersect(box, chunk);
    if (!wanted) continue;
    std::size_t digest = first_digest[c];
    for (const auto& slab : checksum_slabs(chunk, checksums.rows[c])) {
      const auto part = slab.sizes.empty() ? std::optional<ChunkStorageMetadata>(slab) : intersect(*wanted, slab);
      if (part) {
        auto buffer = at::empty(slab.sizes, at::TensorOptions().dtype(stored).device(at::kCPU));
        reader.read(item.storage_fqn, item.dtype, slab, buffer.data_ptr());
        const auto got = checksum(buffer.data_ptr(), static_cast<std::size_t>(volume(slab.sizes) * element));
        if (got != checksums.digests[digest]) mismatch(item, c, slab, checksums.digests[digest], got);
        auto target = narrowed(block, minus(part->offsets, box.offsets), part->sizes);
        target.copy_(narrowed(buffer, minus(part->offsets, slab.offsets), part->sizes));
        copied += volume(part->sizes);
      }
      ++digest;
    }
  }
  if (copied != volume(box.sizes))
    throw FormatError("h5dcp: the saved chunks of '" + item.storage_fqn + "' fill " + std::to_string(copied) +
                      " of the " + std::to_string(volume(box.sizes)) + " elements of the block " + describe_box(box) +
                      " (overlapping chunks): the checkpoint's chunk attributes are damaged");
}

}  // namespace h5dcp::detail
