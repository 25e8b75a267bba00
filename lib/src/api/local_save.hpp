#pragma once
// A node-local tier's step (issue 50), the mechanism; which steps, where and
// when to publish are the manager's (manager/local_tier.hpp):
//
//   save:plan    all_reduce  the save's global plan (with the plan cache)
//   local:stage  all_gather  each rank resolves and checksums its own blocks
//   local:copy   exchange    each rank sends its blocks to its destinations
//   local:write  all_gather  each rank writes its own copy and the copies it
//                            received into its node's step directory, fsynced
//
// A copy is one file per owner rank: a checkpoint file (global plan, every
// checksum) holding the owner's blocks and values only (hdf5/local_file.hpp).
// A failure anywhere is a CheckpointError on every rank; what was written
// stays in the (unpublished) step directory for the caller to remove.

#include <cstdint>
#include <string>

#include "comm/comm.hpp"
#include "h5dcp/options.hpp"
#include "h5dcp/state_dict.hpp"
#include "plan/replica_placement.hpp"

namespace h5dcp::detail {

/// Where and as what one local step is written.
struct LocalStepTarget {
  std::int64_t step = 0;
  std::string run_id;
  const ReplicaPlacement* placement = nullptr;  ///< of the job saving (never null)
  std::string directory;                        ///< this rank's node's step directory (it exists)
};

/// The file name of owner rank `owner`'s copy in a step directory.
std::string local_copy_name(int owner);

/// Writes the local step `target` of `state`: this rank's own copy, and the
/// copies placement.sources[rank] says it holds for ranks of other nodes.
/// Collective; options.planner and options.plan_cache as for h5dcp::save.
/// Throws CheckpointError on every rank (naming the rank, the step and what
/// failed: a block, a full disk, a peer that died mid-copy).
SaveResult save_local_step(const Comm& comm, const StateDict& state, const SaveOptions& options,
                           const LocalStepTarget& target);

}  // namespace h5dcp::detail
