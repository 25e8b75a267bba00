#include "torch/tensor_blocks.hpp"

#include <algorithm>
#include <string>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

at::Tensor narrowed(at::Tensor t, const Shape& offsets, const Shape& sizes) {
  for (std::size_t d = 0; d < sizes.size(); ++d) t = t.narrow(static_cast<std::int64_t>(d), offsets[d], sizes[d]);
  return t;
}

at::Tensor dest_block(const at::Tensor& dest, const ReadItem& item) {
  if (static_cast<std::size_t>(dest.dim()) != item.lengths.size() || item.dest_offsets.size() != item.lengths.size())
    throw UsageError("h5dcp: the destination of '" + item.storage_fqn + "' has " + std::to_string(dest.dim()) +
                     " dimensions, the read " + std::to_string(item.lengths.size()));
  for (std::size_t d = 0; d < item.lengths.size(); ++d)
    if (item.dest_offsets[d] < 0 || item.dest_offsets[d] + item.lengths[d] > dest.size(static_cast<std::int64_t>(d)))
      throw UsageError("h5dcp: the read of '" + item.storage_fqn + "' does not fit its destination tensor");
  // The whole destination (a replicated tensor, loaded whole) needs no view.
  if (std::equal(item.lengths.begin(), item.lengths.end(), dest.sizes().begin()) &&
      std::all_of(item.dest_offsets.begin(), item.dest_offsets.end(), [](std::int64_t o) { return o == 0; }))
    return dest;
  return narrowed(dest, item.dest_offsets, item.lengths);
}

}  // namespace h5dcp::detail
