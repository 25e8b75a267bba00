#pragma once
// The walk behind apply_to_tensors on state dicts, with the path of each
// tensor, so that callers can name it in their errors.

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "h5dcp/state_dict.hpp"

namespace h5dcp::detail {

/// The keys and list positions from the root to a tensor (fqn_of makes its
/// fqn).
using TensorPath = std::vector<std::string>;
using PathTensorFn = std::function<at::Tensor(const at::Tensor&, const TensorPath&)>;

/// A copy of `value` with `fn(t, path)` in place of every defined tensor and
/// sharded-tensor shard (undefined tensors are kept); `path` is where `value`
/// sits and is restored on return.
StateValue apply_to_tensors_at(const StateValue& value, TensorPath& path, const PathTensorFn& fn);
StateDict apply_to_tensors_at(const StateDict& state_dict, TensorPath& path, const PathTensorFn& fn);

}  // namespace h5dcp::detail
