#pragma once
// Pure save planning (no MPI, no HDF5, no torch): the default planner's
// checks of one rank's plan and the coordinator's merge of all of them.

#include <vector>

#include "h5dcp/plan.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

/// Checks one rank's own items: shard ranks and bounds, one dtype per key,
/// one kind per fqn. Throws UsageError naming the key and shard.
void validate_local_plan(const SavePlan& plan);

/// Merges the local plans (index = rank): every fqn must have one kind
/// (tensor, sharded tensor, value, dict or list) on every rank holding it;
/// tensors must agree on dtype and global shape, values on their value;
/// identical blocks and values held by several ranks are written once, by the
/// holder with the fewest bytes assigned so far (largest first); the unique
/// blocks of each tensor must tile its global shape exactly. Throws
/// UsageError naming the fqn, the ranks and the offending boxes.
GlobalSavePlan create_global_save_plan(const std::vector<SavePlan>& local_plans);

}  // namespace h5dcp::detail
