#pragma once
// The state dict h5dcp saves and loads: key -> tensor. A plain at::Tensor is
// replicated (every rank that holds the key holds the same values, and it is
// written once); a ShardedTensor is split across ranks.

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <variant>

#include "h5dcp/metadata.hpp"
#include "h5dcp/sharded_tensor.hpp"

namespace h5dcp {

using StateValue = std::variant<at::Tensor, ShardedTensor>;

/// Keys are sorted, so every rank walks them in the same order.
using StateDict = std::map<std::string, StateValue>;

/// The tensor that `index` names inside `value`: the value itself for a plain
/// tensor, or the local shard starting at `index.offset` for a sharded one
/// (`index.index` is tried first). Throws UsageError when there is no such
/// shard. Not collective.
at::Tensor find_tensor_shard(const StateValue& value, const MetadataIndex& index);

/// find_tensor_shard on the value stored under `index.fqn`; throws UsageError
/// naming the key when the state dict has no such key. Not collective.
at::Tensor find_state_dict_object(const StateDict& state_dict, const MetadataIndex& index);

}  // namespace h5dcp
