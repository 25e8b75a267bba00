#include "torch/empty_tensors.hpp"

#include <ATen/ops/empty.h>

namespace h5dcp::detail {

StateValue empty_chunked_dim0(const std::vector<std::int64_t>& global_shape, const at::TensorOptions& options, int rank,
                              int world) {
  const auto layout = chunk_dim0(global_shape, rank, world);
  return ShardedTensor(global_shape,
                       {Shard{at::empty(chunk_dim0_sizes(global_shape, rank, world), options), layout.offsets}});
}

}  // namespace h5dcp::detail
