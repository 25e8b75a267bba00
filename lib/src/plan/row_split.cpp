#include "plan/row_split.hpp"

#include <algorithm>

namespace h5dcp::detail {

std::int64_t row_bytes(const Shape& shape, std::int64_t element_bytes) {
  auto bytes = element_bytes;
  for (std::size_t d = 1; d < shape.size(); ++d) bytes *= shape[d];
  return bytes;
}

ChunkStorageMetadata rows_box(const Shape& shape, const RowPiece& piece) {
  ChunkStorageMetadata box{Shape(shape.size(), 0), shape};
  if (!shape.empty()) {
    box.offsets[0] = piece.row;
    box.sizes[0] = piece.rows;
  }
  return box;
}

std::vector<RowPiece> split_rows(const std::vector<RowSplitTensor>& tensors, std::int64_t split_min_bytes, int ranks) {
  std::vector<std::int64_t> load(static_cast<std::size_t>(std::max(ranks, 1)), 0);
  std::vector<RowPiece> pieces;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    const auto bytes = volume(t.shape) * t.element_bytes;
    if (bytes == 0) continue;
    const auto rows = t.shape.empty() ? 1 : t.shape[0];
    const auto per_row = row_bytes(t.shape, t.element_bytes);
    if (ranks > 1 && !t.shape.empty() && bytes >= split_min_bytes) {
      const auto per_rank = (rows + ranks - 1) / ranks;
      for (int r = 0; r < ranks; ++r) {
        const auto start = std::min<std::int64_t>(rows, per_rank * r);
        const auto count = std::max<std::int64_t>(0, std::min(per_rank, rows - start));
        if (count == 0) continue;
        load[static_cast<std::size_t>(r)] += count * per_row;
        pieces.push_back({i, start, count, r});
      }
      continue;
    }
    const auto least = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    load[static_cast<std::size_t>(least)] += bytes;
    pieces.push_back({i, 0, rows, least});
  }
  return pieces;
}

}  // namespace h5dcp::detail
