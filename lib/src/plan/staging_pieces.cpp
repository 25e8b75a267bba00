#include "plan/staging_pieces.hpp"

#include "h5dcp/error.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

std::vector<ChunkStorageMetadata> split_block(const ChunkStorageMetadata& box, std::int64_t element_size,
                                              std::int64_t max_bytes) {
  if (max_bytes < element_size) throw UsageError("h5dcp: a staging piece must hold at least one element");
  if (volume(box.sizes) == 0) return {};
  const std::size_t ndim = box.sizes.size();
  // Find the outermost dimension `cut` from which the trailing block fits.
  std::int64_t inner = element_size;
  std::size_t cut = ndim;
  while (cut > 0 && inner * box.sizes[cut - 1] <= max_bytes) inner *= box.sizes[--cut];
  if (cut == 0) return {box};
  // Dimension cut-1 is cut into runs of `run` indices; dimensions before it
  // are walked one index at a time.
  const std::size_t d = cut - 1;
  const std::int64_t run = std::max<std::int64_t>(1, max_bytes / inner);
  std::vector<ChunkStorageMetadata> pieces;
  std::vector<std::int64_t> index(d, 0);
  while (true) {
    for (std::int64_t start = 0; start < box.sizes[d]; start += run) {
      ChunkStorageMetadata piece = box;
      for (std::size_t k = 0; k < d; ++k) {
        piece.offsets[k] = box.offsets[k] + index[k];
        piece.sizes[k] = 1;
      }
      piece.offsets[d] = box.offsets[d] + start;
      piece.sizes[d] = std::min(run, box.sizes[d] - start);
      pieces.push_back(std::move(piece));
    }
    std::size_t k = d;
    while (k > 0 && ++index[k - 1] == box.sizes[k - 1]) index[--k] = 0;
    if (k == 0) break;
  }
  return pieces;
}

}  // namespace h5dcp::detail
