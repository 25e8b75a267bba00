#pragma once
// The torch edge of planning: turns a state dict into the plain items the
// planner works on, and finds the tensors behind planned items.

#include <memory>
#include <vector>

#include "h5dcp/state_dict.hpp"
#include "plan/load_plan.hpp"
#include "plan/save_plan.hpp"

namespace h5dcp::detail {

/// One WriteItem per plain tensor and per local shard, in key order. Throws
/// UsageError for an undefined tensor, an unsupported dtype, or a shard whose
/// offsets do not match the global rank.
SavePlan local_save_plan(const StateDict& state_dict);

/// One ReadItem per plain tensor and per local shard, in key order.
std::vector<ReadItem> local_read_items(const StateDict& state_dict);

/// The bytes of `tensor` contiguous in host memory (the tensor itself when it
/// already is, a copy otherwise), kept alive by the returned pointer.
std::shared_ptr<const void> host_bytes(const at::Tensor& tensor);

}  // namespace h5dcp::detail
