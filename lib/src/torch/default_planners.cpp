// The default save and load planners: one item per leaf of the state dict.

#include <ATen/core/Tensor.h>

#include "h5dcp/error.hpp"
#include "h5dcp/planner.hpp"
#include "plan/load_plan.hpp"
#include "plan/save_plan.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/value_codec.hpp"

namespace h5dcp {
namespace {

DType checked_dtype(const at::Tensor& tensor, const std::string& what) {
  if (!tensor.defined()) throw UsageError("h5dcp: " + what + " is an undefined tensor");
  const auto dtype = detail::to_dtype(tensor.scalar_type());
  if (!dtype)
    throw UsageError("h5dcp: " + what + " has dtype " + std::string(c10::toString(tensor.scalar_type())) +
                     ", which h5dcp cannot store (supported: " + supported_dtype_names() + ")");
  return *dtype;
}

Shape shape_of(const at::Tensor& tensor) { return Shape(tensor.sizes().begin(), tensor.sizes().end()); }

std::string shard_name(const std::string& fqn, std::size_t i) {
  return "shard " + std::to_string(i) + " of '" + fqn + "'";
}

}  // namespace

// --- save -------------------------------------------------------------------

void DefaultSavePlanner::set_up(const StateDict& state_dict, bool is_coordinator) {
  state_dict_ = &state_dict;
  is_coordinator_ = is_coordinator;
}

SavePlan DefaultSavePlanner::create_local_plan() {
  SavePlan plan;
  const auto flat = flatten_state_dict(*state_dict_);
  for (const auto& [fqn, kind] : flat.containers) plan.containers.emplace_back(fqn, kind);
  for (const auto& [fqn, value] : flat.leaves) {
    if (const auto* tensor = std::get_if<at::Tensor>(&value)) {
      const auto shape = shape_of(*tensor);
      plan.items.push_back(WriteItem{MetadataIndex{fqn, std::nullopt, std::nullopt},
                                     WriteItemType::Tensor,
                                     checked_dtype(*tensor, "'" + fqn + "'"),
                                     shape,
                                     {Shape(shape.size(), 0), shape},
                                     {},
                                     {}});
    } else if (const auto* sharded = std::get_if<ShardedTensor>(&value)) {
      for (std::size_t i = 0; i < sharded->local_shards().size(); ++i) {
        const auto& shard = sharded->local_shards()[i];
        plan.items.push_back(WriteItem{MetadataIndex{fqn, shard.offsets, i},
                                       WriteItemType::Shard,
                                       checked_dtype(shard.tensor, shard_name(fqn, i)),
                                       sharded->global_shape(),
                                       {shard.offsets, shape_of(shard.tensor)},
                                       {},
                                       {}});
      }
    } else {
      auto encoded = detail::encode_value(value, fqn);
      if (!encoded) throw UsageError("h5dcp: '" + fqn + "' is a Stateful that was not expanded into its state dict");
      plan.items.push_back(WriteItem{MetadataIndex{fqn, std::nullopt, std::nullopt},
                                     WriteItemType::Value,
                                     DType::UInt8,
                                     {},
                                     {},
                                     std::move(encoded->encoding),
                                     std::move(encoded->payload)});
    }
  }
  detail::validate_local_plan(plan);
  return plan;
}

GlobalSavePlan DefaultSavePlanner::create_global_plan(const std::vector<SavePlan>& local_plans) {
  return detail::create_global_save_plan(local_plans);
}

at::Tensor DefaultSavePlanner::resolve_tensor(const PlannedTensor& tensor, const PlannedChunk& chunk) {
  return find_state_dict_object(
      *state_dict_, MetadataIndex{tensor.fqn, tensor.sharded ? std::optional(chunk.chunk.offsets) : std::nullopt,
                                  chunk.writer_shard_index});
}

// --- load -------------------------------------------------------------------

void DefaultLoadPlanner::set_up(StateDict& state_dict, const Metadata& metadata, bool is_coordinator) {
  state_dict_ = &state_dict;
  metadata_ = &metadata;
  is_coordinator_ = is_coordinator;
}

LoadPlan DefaultLoadPlanner::create_local_plan() {
  std::vector<detail::LoadRequest> wanted;
  const auto flat = flatten_state_dict(*state_dict_);
  for (const auto& [fqn, value] : flat.leaves) {
    if (const auto* tensor = std::get_if<at::Tensor>(&value)) {
      const auto shape = shape_of(*tensor);
      wanted.push_back({MetadataIndex{fqn, std::nullopt, std::nullopt},
                        false,
                        checked_dtype(*tensor, "'" + fqn + "'"),
                        shape,
                        {Shape(shape.size(), 0), shape}});
    } else if (const auto* sharded = std::get_if<ShardedTensor>(&value)) {
      for (std::size_t i = 0; i < sharded->local_shards().size(); ++i) {
        const auto& shard = sharded->local_shards()[i];
        wanted.push_back({MetadataIndex{fqn, shard.offsets, i},
                          false,
                          checked_dtype(shard.tensor, shard_name(fqn, i)),
                          sharded->global_shape(),
                          {shard.offsets, shape_of(shard.tensor)}});
      }
    } else {
      wanted.push_back({MetadataIndex{fqn, std::nullopt, std::nullopt}, true, DType::UInt8, {}, {}});
    }
  }
  for (auto& request : wanted) {
    const auto offset = storage_offsets_.find(request.dest_index.fqn);
    if (offset != storage_offsets_.end()) request.storage_offset = offset->second;
  }
  return detail::create_local_load_plan(wanted, *metadata_, strict_, convert_dtype_);
}

at::Tensor DefaultLoadPlanner::resolve_tensor(const ReadItem& item) {
  return find_state_dict_object(*state_dict_, item.dest_index);
}

void DefaultLoadPlanner::commit_tensor(const ReadItem&, const at::Tensor&) {}

void DefaultLoadPlanner::load_value(const ReadItem& item, StateValue value) {
  value_at(*state_dict_, item.dest_index.fqn) = std::move(value);
}

}  // namespace h5dcp
