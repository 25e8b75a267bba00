#include <ATen/core/Tensor.h>

#include "h5dcp/error.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {

at::Tensor find_tensor_shard(const StateValue& value, const MetadataIndex& index) {
  if (const auto* tensor = std::get_if<at::Tensor>(&value)) return *tensor;
  const auto& shards = std::get<ShardedTensor>(value).local_shards();
  if (!index.offset)
    throw UsageError("h5dcp: '" + index.fqn + "' is sharded; looking up one of its shards needs offsets");
  if (index.index && *index.index < shards.size() && shards[*index.index].offsets == *index.offset)
    return shards[*index.index].tensor;
  for (const auto& shard : shards)
    if (shard.offsets == *index.offset) return shard.tensor;
  std::string at;
  for (auto o : *index.offset) at += (at.empty() ? "" : ", ") + std::to_string(o);
  throw UsageError("h5dcp: no local shard of '" + index.fqn + "' starts at [" + at + "]");
}

at::Tensor find_state_dict_object(const StateDict& state_dict, const MetadataIndex& index) {
  const auto it = state_dict.find(index.fqn);
  if (it == state_dict.end()) throw UsageError("h5dcp: the state dict has no key '" + index.fqn + "'");
  return find_tensor_shard(it->second, index);
}

}  // namespace h5dcp
