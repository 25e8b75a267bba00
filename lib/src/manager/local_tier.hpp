#pragma once
// The node-local tier's policy that needs no files yet (issue 50): checking
// a manager's LocalTierOptions, the failure-domain groups they give, each
// node's local directory, and the replica placement of a job from its node
// survey (comm/node_survey.hpp) and plan/replica_placement.hpp.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/comm.hpp"
#include "h5dcp/checkpoint_manager.hpp"
#include "plan/replica_placement.hpp"

namespace h5dcp::detail {

/// Throws UsageError naming the first field of `options` that is not valid
/// (LocalTierOptions: an empty directory, replicas < 0, every_steps < 1,
/// drain_every_steps < 0 or not a multiple of every_steps, keep < 1, both
/// groups and groups_variable, a group entry with an empty name, a
/// run_id that is too long or not printable ASCII without spaces).
void validate_local_tier(const LocalTierOptions& options);

/// `local` as settings for Comm::require_same (every rank must pass the
/// same): one "local" setting "none" without a tier, else one per field.
std::vector<Setting> local_tier_settings(const std::optional<LocalTierOptions>& local);

/// "node=group,node=group,...": whitespace around names and entries is
/// ignored, and so are empty entries ("a=r1,,b=r2,"). Throws UsageError,
/// naming `source` (where the text came from), when an entry has no '=',
/// an empty node or group, or a node is given two different groups.
std::map<std::string, std::string> parse_node_groups(std::string_view text, std::string_view source);

/// The groups of `options`: its `groups`, else its `groups_variable`'s
/// value (`variable_value`, std::nullopt when unset) parsed, else none
/// (every node its own group). Throws UsageError when the variable is named
/// but unset, or its value does not parse.
std::map<std::string, std::string> local_tier_groups(const LocalTierOptions& options,
                                                     const std::optional<std::string>& variable_value);

/// `pattern` with every "{node}" replaced by `node`.
std::string local_directory_for(std::string_view pattern, std::string_view node);

/// The placement of the job whose rank r runs on `rank_nodes[r]`, with the
/// groups of `options` (local_tier_groups) and its replicas
/// (place_replicas; UsageError when the job has too few nodes or groups).
/// Pure: the same on every rank given the same arguments. With `fit`, the
/// copies are as many as the job's groups allow (a job that lost nodes
/// still recovers and saves, with fewer copies: placement.replicas says how
/// many) instead of that UsageError.
ReplicaPlacement local_tier_placement(const std::vector<std::string>& rank_nodes, const LocalTierOptions& options,
                                      const std::optional<std::string>& variable_value, bool fit = false);

/// A local step's directory name in a node's local directory,
/// "local-step-<step, 8 digits or more>", and the step of such a name.
std::string local_step_name(std::int64_t step);
std::optional<std::int64_t> local_step_of(const std::string& name);

/// The local steps in `node_directory`, ascending (names as local_step_name).
std::vector<std::int64_t> list_local_steps(const std::string& node_directory);

/// The run identity recorded in the shared checkpoint directory
/// `shared_directory` (the file local-run-id), written there first, durably,
/// when there is none: "<SLURM_JOB_ID or nojob>-<UTC time>-<8 hex digits>".
/// A job restarted on the same shared directory thus adopts its
/// predecessor's identity and can recover from its local copies. Throws
/// IoError, or FormatError when the recorded identity is not a valid one.
std::string adopt_run_id(const std::string& shared_directory);

/// Marks `node_directory` as node `node`'s: a small file named after the
/// node (".h5dcp-node-<node>"), written durably. Throws IoError.
void mark_node_directory(const std::string& node_directory, const std::string& node);

/// The nodes of `job_nodes` other than `node` whose mark is in
/// `node_directory`, i.e. that use the same directory: a directory that is
/// not node-local (a shared file system, and no "{node}" in the path).
/// Throws IoError when the directory cannot be listed.
std::vector<std::string> nodes_sharing_directory(const std::string& node_directory, const std::string& node,
                                                 const std::vector<std::string>& job_nodes);

/// Makes the empty partial step directory for `step` in `node_directory`
/// (what an earlier attempt left there removed first). Given `spare` (a
/// step directory publish_local_step kept aside), renames it to the
/// partial instead: its files, this job's copies of an earlier step, are
/// then written over in place (api/local_save.cpp), which spares a tmpfs's
/// page allocation and the creation of every file. Throws IoError.
void prepare_local_step(const std::string& node_directory, std::int64_t step, const std::optional<std::string>& spare);

/// Removes a partial or spare step directory of this tier's (its copies
/// only). Never throws.
void remove_local_step_directory(const std::string& path) noexcept;

/// Publishes the complete step directory `partial` (its files fsynced) as
/// step `step` of `node_directory`: fsyncs it, puts it in place
/// (publish_directory), points latest-local at it and removes the oldest
/// local steps beyond `keep`, except the newest of them that `recyclable`
/// accepts: that one is kept aside, hidden (named as a partial step, so a
/// crash leaves it to remove_local_orphans), for prepare_local_step to
/// reuse; its path is returned. The tier thus holds `keep` + 1 steps
/// between saves, as many as it holds while a step is written. Throws
/// IoError when the publish fails (the removals never throw).
std::optional<std::string> publish_local_step(const std::string& node_directory, const std::string& partial,
                                              std::int64_t step, int keep,
                                              const std::function<bool(std::int64_t)>& recyclable);

/// Removes what crashed local saves left in `node_directory` (hidden
/// partial step directories). Never throws. Returns the paths removed.
std::vector<std::string> remove_local_orphans(const std::string& node_directory) noexcept;

/// The name of a partial step directory for `step` in a node's directory.
std::string partial_local_step_name(std::int64_t step);

/// Collective over `comm`: the node survey (survey_nodes), every rank's
/// value of options.groups_variable (required the same on every rank,
/// UsageError otherwise), and local_tier_placement from them, the same on
/// every rank; a UsageError of the placement is thrown on every rank.
ReplicaPlacement survey_local_tier(const Comm& comm, const LocalTierOptions& options, bool fit = false);

}  // namespace h5dcp::detail
