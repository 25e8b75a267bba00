#include "torch/tensor_blocks.hpp"

#include <string>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

at::Tensor narrowed(at::Tensor t, const Shape& offsets, const Shape& sizes) {
  // A dimension taken whole needs no view: a replicated tensor loaded whole
  // is then the tensor itself, with no view made (a view per tensor is a
  // load's time when there are thousands of small ones).
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    const auto dim = static_cast<std::int64_t>(d);
    if (offsets[d] != 0 || sizes[d] != t.size(dim)) t = t.narrow(dim, offsets[d], sizes[d]);
  }
  return t;
}

at::Tensor dest_block(const at::Tensor& dest, const ReadItem& item) {
  if (static_cast<std::size_t>(dest.dim()) != item.lengths.size() || item.dest_offsets.size() != item.lengths.size())
    throw UsageError("h5dcp: the destination of '" + item.storage_fqn + "' has " + std::to_string(dest.dim()) +
                     " dimensions, the read " + std::to_string(item.lengths.size()));
  for (std::size_t d = 0; d < item.lengths.size(); ++d)
    if (item.dest_offsets[d] < 0 || item.dest_offsets[d] + item.lengths[d] > dest.size(static_cast<std::int64_t>(d)))
      throw UsageError("h5dcp: the read of '" + item.storage_fqn + "' does not fit its destination tensor");
  return narrowed(dest, item.dest_offsets, item.lengths);
}

}  // namespace h5dcp::detail
