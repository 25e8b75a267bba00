#pragma once
// A state dict as the pickle object torch.save would write for it: dicts
// with str keys, lists, None, bool, int, float, str, bytes; tensors are made
// by the caller, which decides their storages.

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>

#include "formats/pickle_value.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp::detail {

/// Makes the object of the tensor at `fqn`.
using TensorObjectFn = std::function<pickle::ObjectPtr(const std::string& fqn, const at::Tensor& tensor)>;

/// The pickle object of `state_dict`; `tensor` is called for every plain
/// tensor, in fqn order. ByteString and PickledObject become bytes. Throws
/// UsageError naming the fqn of a ShardedTensor or anything else a
/// torch.save file cannot hold.
pickle::ObjectPtr pickle_tree(const StateDict& state_dict, const TensorObjectFn& tensor);

/// The pickle object of one value of a state dict at `fqn` (a dict, a list,
/// a tensor or a scalar), with the same rules.
pickle::ObjectPtr pickle_value(const StateValue& value, const std::string& fqn, const TensorObjectFn& tensor);

}  // namespace h5dcp::detail
