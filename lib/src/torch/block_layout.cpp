#include <algorithm>

#include "h5dcp/sharded_tensor.hpp"

namespace h5dcp {

std::vector<std::int64_t> chunk_dim0_sizes(const std::vector<std::int64_t>& global_shape, int rank, int world) {
  auto sizes = global_shape;
  if (sizes.empty()) return sizes;
  const auto rows = global_shape[0];
  const auto per_rank = (rows + world - 1) / world;
  const auto start = std::min<std::int64_t>(rows, per_rank * rank);
  sizes[0] = std::max<std::int64_t>(0, std::min(per_rank, rows - start));
  return sizes;
}

BlockLayout chunk_dim0(const std::vector<std::int64_t>& global_shape, int rank, int world) {
  BlockLayout layout{global_shape, std::vector<std::int64_t>(global_shape.size(), 0)};
  if (global_shape.empty()) return layout;
  const auto per_rank = (global_shape[0] + world - 1) / world;
  layout.offsets[0] = std::min<std::int64_t>(global_shape[0], per_rank * rank);
  return layout;
}

}  // namespace h5dcp
