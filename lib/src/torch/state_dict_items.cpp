#include "torch/state_dict_items.hpp"

#include <ATen/core/Tensor.h>

#include "h5dcp/error.hpp"
#include "torch/dtype_mapping.hpp"

namespace h5dcp::detail {
namespace {

DType checked_dtype(const at::Tensor& tensor, const std::string& what) {
  if (!tensor.defined()) throw UsageError("h5dcp: " + what + " is an undefined tensor");
  const auto dtype = to_dtype(tensor.scalar_type());
  if (!dtype)
    throw UsageError("h5dcp: " + what + " has dtype " + std::string(c10::toString(tensor.scalar_type())) +
                     ", which h5dcp cannot store (supported: float64/32/16, bfloat16, int64/32/16/8, uint8, bool)");
  return *dtype;
}

Shape shape_of(const at::Tensor& tensor) { return Shape(tensor.sizes().begin(), tensor.sizes().end()); }

std::string shard_name(const std::string& key, std::size_t i) {
  return "shard " + std::to_string(i) + " of '" + key + "'";
}

template <typename Fn>
void for_each_block(const StateDict& state_dict, Fn&& fn) {
  for (const auto& [key, value] : state_dict) {
    if (const auto* tensor = std::get_if<at::Tensor>(&value)) {
      const auto shape = shape_of(*tensor);
      fn(MetadataIndex{key, std::nullopt, std::nullopt}, checked_dtype(*tensor, "'" + key + "'"), shape,
         ChunkStorageMetadata{Shape(shape.size(), 0), shape}, false);
      continue;
    }
    const auto& sharded = std::get<ShardedTensor>(value);
    for (std::size_t i = 0; i < sharded.local_shards().size(); ++i) {
      const auto& shard = sharded.local_shards()[i];
      const auto dtype = checked_dtype(shard.tensor, shard_name(key, i));
      fn(MetadataIndex{key, shard.offsets, i}, dtype, sharded.global_shape(),
         ChunkStorageMetadata{shard.offsets, shape_of(shard.tensor)}, true);
    }
  }
}

}  // namespace

SavePlan local_save_plan(const StateDict& state_dict) {
  SavePlan plan;
  for_each_block(state_dict, [&](MetadataIndex index, DType dtype, const Shape& global, ChunkStorageMetadata chunk,
                                 bool sharded) {
    plan.items.push_back(WriteItem{std::move(index), dtype, global, std::move(chunk), sharded});
  });
  return plan;
}

std::vector<ReadItem> local_read_items(const StateDict& state_dict) {
  std::vector<ReadItem> items;
  for_each_block(state_dict, [&](MetadataIndex index, DType dtype, const Shape& global, ChunkStorageMetadata chunk,
                                 bool) { items.push_back(ReadItem{std::move(index), dtype, global, std::move(chunk)}); });
  return items;
}

std::shared_ptr<const void> host_bytes(const at::Tensor& tensor) {
  auto host = tensor.device().is_cpu() ? tensor.contiguous() : tensor.to(at::kCPU).contiguous();
  auto owner = std::make_shared<at::Tensor>(std::move(host));
  return std::shared_ptr<const void>(owner, owner->data_ptr());
}

}  // namespace h5dcp::detail
