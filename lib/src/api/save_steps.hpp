#pragma once
// The phases of a save, shared by save() and the async saver.
//
//   save:plan    all_reduce  local plans -> coordinator's global plan -> all
//   save:create  all_gather  every rank creates the file, groups and datasets
//   save:write   all_gather  each rank writes the blocks and values assigned to it
//   save:sync    all_gather  close the file, fsync it from every rank
//   save:commit  broadcast   coordinator renames the file into place
//
// A failure in any step is a CheckpointError on every rank; after the file
// exists, the failure path closes it on every rank and the coordinator
// removes it, so nothing partial is ever published.

#include <functional>
#include <string>

#include "comm/comm.hpp"
#include "h5dcp/options.hpp"
#include "h5dcp/planner.hpp"
#include "hdf5/container_writer.hpp"
#include "plan/checksum_layout.hpp"

namespace h5dcp::detail {

/// A save's global plan, and whether it came from a SavePlanCache.
struct PlannedSave {
  GlobalSavePlan plan;
  bool reused = false;
};

/// The plan step. `prepare` runs first on every rank inside the step (a
/// throw there is a failure of this rank in "save:plan"). With a `cache`
/// (every rank passes one or none: the callers agree on it first), the
/// cached plan is reused when no rank's layout changed, and a new plan is
/// kept (plan/plan_reuse.hpp says how). Collective.
PlannedSave plan_save(const Comm& comm, SavePlanner& planner, const StateDict& state_dict, const std::string& path,
                      const std::function<void()>& prepare, SavePlanCache* cache = nullptr);

/// create -> write (`write` gets the open writer and returns the checksums
/// of the chunks this rank wrote) -> checksums (stored on every dataset) ->
/// sync -> commit, with the cleanup on failure. Collective.
void write_and_publish(const Comm& comm, const GlobalSavePlan& plan, const std::string& path,
                       const std::function<std::vector<ChunkChecksums>(ContainerWriter&)>& write);

/// Every rank's chunk checksums (`per_rank`: encoded, one entry per rank),
/// arranged per plan tensor in chunk order; throws Error when a block with
/// elements has none.
std::vector<TensorChecksums> assemble_checksums(const GlobalSavePlan& plan, const std::vector<Bytes>& per_rank);

/// The tensor the planner resolves for a block, checked against the plan
/// (shape and dtype); throws UsageError naming the block.
at::Tensor resolve_block(SavePlanner& planner, const PlannedTensor& tensor, const PlannedChunk& chunk);

/// What a save returns.
SaveResult save_result_of(const GlobalSavePlan& plan, bool plan_reused);

/// The settings of a save that every rank must pass the same, for
/// CheckpointSession (the I/O mode, whether a plan cache is used).
std::vector<Setting> save_settings(const SaveOptions& options);

}  // namespace h5dcp::detail
