#pragma once
// Who writes which rows of each tensor, when a conversion spreads tensors
// over ranks (safetensors and DCP exports): tensors of at least
// `split_min_bytes` are split along dim 0 as torch.chunk splits them
// (ceil(rows / ranks) rows each, the last ranks fewer or none), smaller
// ones go whole to the least loaded rank so far. Pure: every rank computes
// the same pieces.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

/// A tensor to place: its shape and the bytes of one element.
struct RowSplitTensor {
  Shape shape;
  std::int64_t element_bytes = 1;
};

/// Rows [row, row + rows) of tensor `tensor` (an index into the input),
/// written by `rank`. A 0-d tensor is one piece of one "row".
struct RowPiece {
  std::size_t tensor = 0;
  std::int64_t row = 0;
  std::int64_t rows = 0;
  int rank = 0;
};

/// Bytes of one row of `shape` (of the whole tensor when it is 0-d).
std::int64_t row_bytes(const Shape& shape, std::int64_t element_bytes);

/// The box of `piece`'s rows in a tensor of `shape`: rows [row, row + rows)
/// and every other dimension whole; the whole tensor when it is 0-d.
ChunkStorageMetadata rows_box(const Shape& shape, const RowPiece& piece);

/// The pieces of every tensor, in input order; empty tensors have none.
std::vector<RowPiece> split_rows(const std::vector<RowSplitTensor>& tensors, std::int64_t split_min_bytes, int ranks);

}  // namespace h5dcp::detail
