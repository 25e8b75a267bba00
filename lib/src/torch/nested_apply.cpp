// The walk of torch/nested_apply.hpp: the GPU copies (torch/device_copies.cpp)
// and h5dcp::training's apply_to_tensors are built on it.

#include "torch/nested_apply.hpp"

#include <string>
#include <utility>

namespace h5dcp::detail {

StateValue apply_to_tensors_at(const StateValue& value, TensorPath& path, const PathTensorFn& fn) {
  if (const auto* tensor = std::get_if<at::Tensor>(&value)) return tensor->defined() ? fn(*tensor, path) : *tensor;
  if (const auto* sharded = std::get_if<ShardedTensor>(&value)) {
    std::vector<Shard> shards;
    shards.reserve(sharded->local_shards().size());
    for (const auto& shard : sharded->local_shards())
      shards.push_back(Shard{shard.tensor.defined() ? fn(shard.tensor, path) : shard.tensor, shard.offsets});
    return ShardedTensor(sharded->global_shape(), std::move(shards));
  }
  if (const auto* dict = std::get_if<StateDict>(&value)) return apply_to_tensors_at(*dict, path, fn);
  if (const auto* list = std::get_if<StateList>(&value)) {
    StateList out;
    out.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
      path.push_back(std::to_string(i));
      out.push_back(apply_to_tensors_at((*list)[i], path, fn));
      path.pop_back();
    }
    return out;
  }
  return value;  // None, scalars, strings, bytes, pickles, Stateful objects
}

StateDict apply_to_tensors_at(const StateDict& state_dict, TensorPath& path, const PathTensorFn& fn) {
  StateDict out;
  for (const auto& [key, child] : state_dict) {
    path.push_back(key);
    out.emplace_hint(out.end(), key, apply_to_tensors_at(child, path, fn));
    path.pop_back();
  }
  return out;
}

}  // namespace h5dcp::detail
