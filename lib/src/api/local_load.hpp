#pragma once
// Recovering from a node-local tier (issue 50), the mechanism; which step,
// and whether at all, is plan/local_step_choice's, asked by the manager:
//
//   local:survey   all_gather  each node's first rank reports the local steps
//                              its node holds, every copy's identity, index
//                              and chunk owners read (not its blocks)
//   local:index    all_gather  the rank serving owner 0 reads the step's index
//   local:plan     all_gather  each rank plans its reads (any rank count,
//                              any sharding: the load planner's usual plan)
//   local:request  exchange    each rank asks the serving ranks for the
//                              saved chunks its reads overlap
//   local:serve    exchange    the serving ranks read them (checksums
//                              verified) and send them back
//   local:check    all_gather  every rank learns which copies could not be
//                              served; if any, nothing is loaded and the
//                              manager chooses again without them
//   local:read     all_gather  each rank copies its blocks out of them
//
// Each copy used is read once, by the rank that serves it: a copy with a
// damaged block is found then, and its replica (or an older step) is chosen
// in a second pass, which reads only what the first did not.
// Only the serving ranks read files, each from its own node's directory: no
// byte is read from the shared directory.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comm/comm.hpp"
#include "h5dcp/options.hpp"
#include "h5dcp/state_dict.hpp"
#include "plan/local_step_choice.hpp"

namespace h5dcp::detail {

/// A local step directory a node holds.
struct LocalStepDirectory {
  std::int64_t step = 0;
  std::string directory;
};

/// What the node `node` holds of `steps`: each copy in them with its
/// identity, and whether its index and chunk owners read (a copy whose do
/// not is reported with why; its blocks are checked when served). Not
/// collective; reads files, never throws for what they hold.
SurvivingNodeReport survey_local_copies(const std::string& node, const std::vector<LocalStepDirectory>& steps);

/// Collective (step local:survey): the reports of every node, the same on
/// every rank; `survey` runs on every rank and returns its node's report on
/// each node's first rank, std::nullopt on the others.
std::vector<SurvivingNodeReport> gather_node_reports(const Comm& comm,
                                                     const std::function<std::optional<SurvivingNodeReport>()>& survey);

/// Where each owner rank of the chosen step is read: the rank of this job
/// that serves it and the path of its copy on that rank's node.
struct LocalRecoverySources {
  std::int64_t step = 0;
  std::vector<int> server;         ///< by owner rank
  std::vector<std::string> files;  ///< by owner rank
  std::vector<bool> here;          ///< by owner rank: its copy lies on this rank's node, which reads it in place
};

/// What a recovery moved, all ranks together.
struct LocalRecoveryCounts {
  std::int64_t bytes_read = 0;      ///< read from local copies, by every rank
  std::int64_t bytes_received = 0;  ///< received over MPI from the ranks serving copies on other nodes
};

/// What load_from_local_copies did, the same on every rank.
struct LocalRecoveryResult {
  LocalRecoveryCounts counts;
  /// Owner rank -> why its copy could not be read (a checksum differs,
  /// the file is cut short). Not empty: choose again without these copies
  /// (mark_damaged).
  std::map<int, std::string> damaged;
  /// With `damaged`: parts of `state` were written before the damage was
  /// found (a copy on a rank's own node is read straight into its blocks).
  /// The next load, of another step or of the shared checkpoint, writes
  /// every key again; without one, the state must not be used.
  bool state_written = false;
};

/// Loads `state` (in place, any rank count, any sharding) from the copies
/// `sources` names, every block's checksums verified as it is read: a
/// rank reads the chunks whose copy lies on its node itself, straight into
/// its blocks, and receives the others over MPI from the rank serving them.
/// Collective. A copy that cannot be read is reported in `damaged`, not
/// thrown; anything else throws CheckpointError on every rank like
/// h5dcp::load (a missing key, a wrong shape, a peer that died); sources
/// without a server, a file and a place for every owner throw UsageError.
LocalRecoveryResult load_from_local_copies(const Comm& comm, StateDict& state, const LoadOptions& options,
                                           const LocalRecoverySources& sources);

}  // namespace h5dcp::detail
