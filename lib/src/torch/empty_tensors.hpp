#pragma once
// Empty tensors to load into, shaped from a checkpoint's metadata.

#include <ATen/core/Tensor.h>

#include "h5dcp/state_dict.hpp"

namespace h5dcp::detail {

/// A ShardedTensor of `global_shape` whose one local shard holds this rank's
/// rows, split like torch.chunk over `world` ranks (rank `rank`); empty
/// (uninitialized) memory.
StateValue empty_chunked_dim0(const std::vector<std::int64_t>& global_shape, const at::TensorOptions& options, int rank,
                              int world);

}  // namespace h5dcp::detail
