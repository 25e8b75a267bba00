#include "plan/checksum_layout.hpp"

#include <algorithm>

#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

std::int64_t checksum_slab_rows(const ChunkStorageMetadata& chunk, std::int64_t element_size,
                                std::int64_t tensor_bytes) {
  if (chunk.sizes.empty()) return 1;
  const std::int64_t target = std::max<std::int64_t>(std::int64_t{1} << 20, (tensor_bytes + 4095) / 4096);
  const auto row_bytes = element_size * volume(Shape(chunk.sizes.begin() + 1, chunk.sizes.end()));
  return std::max<std::int64_t>(1, row_bytes == 0 ? 1 : target / row_bytes);
}

std::vector<ChunkStorageMetadata> checksum_slabs(const ChunkStorageMetadata& chunk, std::int64_t rows) {
  if (volume(chunk.sizes) == 0) return {};
  if (chunk.sizes.empty()) return {chunk};
  std::vector<ChunkStorageMetadata> slabs;
  for (std::int64_t start = 0; start < chunk.sizes[0]; start += rows) {
    auto slab = chunk;
    slab.offsets[0] = chunk.offsets[0] + start;
    slab.sizes[0] = std::min(rows, chunk.sizes[0] - start);
    slabs.push_back(std::move(slab));
  }
  return slabs;
}

std::int64_t checksum_slab_count(const ChunkStorageMetadata& chunk, std::int64_t rows) {
  if (volume(chunk.sizes) == 0) return 0;
  if (chunk.sizes.empty()) return 1;
  return (chunk.sizes[0] - 1) / rows + 1;
}

std::vector<std::int64_t> checksum_slab_bytes(const ChunkStorageMetadata& chunk, std::int64_t rows,
                                              std::int64_t element_size) {
  if (volume(chunk.sizes) == 0) return {};
  if (chunk.sizes.empty()) return {element_size};
  const auto row_bytes = element_size * volume(Shape(chunk.sizes.begin() + 1, chunk.sizes.end()));
  std::vector<std::int64_t> bytes;
  bytes.reserve(static_cast<std::size_t>(checksum_slab_count(chunk, rows)));
  for (std::int64_t start = 0; start < chunk.sizes[0]; start += rows)
    bytes.push_back(std::min(rows, chunk.sizes[0] - start) * row_bytes);
  return bytes;
}

}  // namespace h5dcp::detail
