#pragma once
// A node-local tier's step (issue 50), the mechanism; which steps, where and
// when to publish are the manager's (manager/local_tier.hpp):
//
// stage_local_step, in the caller's thread (all it waits for):
//   save:plan    all_reduce  the save's global plan (with the plan cache)
//   local:stage  all_gather  each rank copies its own blocks out and
//                            checksums them
// write_local_step, in the caller's thread or a background one:
//   local:copy   exchange    each rank sends its blocks to its destinations
//   local:write  all_gather  each rank writes its own copy and the copies it
//                            received into its node's step directory, fsynced
//
// A copy is one file per owner rank: a checkpoint file (global plan, every
// checksum) holding the owner's blocks and values only (hdf5/local_file.hpp),
// made anew, or written over in place when the directory holds this rank's
// copy of an earlier step of the same layout (StagedLocalStep::layout).
// A failure anywhere is a CheckpointError on every rank; what was written
// stays in the (unpublished) step directory for the caller to remove.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "h5dcp/options.hpp"
#include "h5dcp/state_dict.hpp"
#include "plan/block_writes.hpp"
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

/// A local step staged: the plan, and this rank's blocks copied out of the
/// state dict, packed in plan order (what is sent to its partners as is).
/// Kept from step to step, so that its buffers' memory is reused: a local
/// checkpoint every step then allocates and page-faults nothing.
struct StagedLocalStep {
  GlobalSavePlan plan;
  bool plan_reused = false;
  std::vector<BlockWrite> mine;  ///< this rank's blocks, in plan order
  std::vector<std::size_t> at;   ///< where each starts in `packed`; the last entry is its size
  Bytes packed;
  std::vector<Bytes> checksums;  ///< every rank's blocks' checksums (encoded ChunkChecksums), by rank
  std::vector<Bytes> received;   ///< write_local_step's: the blocks of the ranks this one holds copies of
  /// The layout's generation: one more each time the plan is not the last
  /// save's (the plan cache's reuse); and the generation each step this
  /// rank wrote had. A copy of such a step, found where this step's goes
  /// (a spare step directory the manager renamed there), is written over in
  /// place when its generation is this one: the same datasets at the same
  /// places, so only the data and a few attributes change.
  std::uint64_t layout = 0;
  std::map<std::int64_t, std::uint64_t> layout_of_step;
};

/// Plans the step (the file name of this rank's copy in `directory` is the
/// plan's path) and copies this rank's blocks into `staged`: once it
/// returns, the caller may change `state`. Collective; options.planner and
/// options.plan_cache as for h5dcp::save. Throws CheckpointError on every rank.
void stage_local_step(const Comm& comm, const StateDict& state, const SaveOptions& options,
                      const std::string& directory, StagedLocalStep& staged);

/// Writes the staged step as `target`: this rank's own copy, and the copies
/// placement.sources[rank] says it holds for ranks of other nodes. Collective
/// (any thread, one at a time). Throws CheckpointError on every rank (naming
/// the rank, the step and what failed: a block, a full disk, a peer that
/// died mid-copy).
SaveResult write_local_step(const Comm& comm, StagedLocalStep& staged, const LocalStepTarget& target);

}  // namespace h5dcp::detail
