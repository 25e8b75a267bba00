#pragma once
// CheckpointManager: a directory of step checkpoints, the way a training job
// keeps them.
//
//   DIR/step-00000100.h5   one h5dcp checkpoint per saved step (path_for)
//   DIR/latest             "step-00000100.h5\n": the newest checkpoint this
//                          job published (written atomically: temporary
//                          file, fsync, rename, fsync of DIR)
//
// - Saving a step writes DIR/step-<step>.h5 with h5dcp::save or an async
//   save (same atomic publishing: the file appears complete or not at all).
//   Only after the checkpoint is published does the coordinator point
//   `latest` at it and apply the retention policy.
// - Retention: keep the newest `keep_last` checkpoints (0: keep all) plus,
//   forever, every step that is a multiple of `keep_every` (0: none). The
//   checkpoint just saved is never removed, even when older steps than
//   existing ones are saved (after resuming from an older checkpoint).
// - Finding the checkpoint to resume from (latest(), load()): the highest
//   step whose file exists and whose metadata reads back as an h5dcp
//   checkpoint. `latest` is only a hint for people and tools: a job killed
//   between publishing and updating it leaves it stale, and a file may be
//   damaged or removed by hand; a newer complete checkpoint always wins, and
//   a damaged one is skipped with a warning (on the coordinator's stderr,
//   and in last_scan()).
// - One job at a time: a manager holds a lock on DIR for its lifetime (an
//   fcntl() lock on DIR/.h5dcp-manager.lock, taken by the coordinator; it
//   works on NFS, and on Lustre mounted with flock). A second manager on the
//   same DIR, in another job or in the same process, is refused with a
//   CheckpointError on every rank: "h5dcp: checkpoint directory 'DIR' is in
//   use by another job (lock held by pid N on host H)". The lock goes with
//   the manager (its destructor) or its process (a killed job holds none).
//   Where the file system has no fcntl() locks, a warning says so and the
//   manager goes on without one.
// - Orphans: a save killed mid-way (kill -9, node loss) leaves its temporary
//   ".<name>.h5dcp-partial.<host>.<pid>.<random>" file behind. Making a
//   manager, once it holds the lock, removes every such file in DIR, and
//   leftover temporary `latest` files, except those whose writer still runs
//   on this host (a plain h5dcp::save into DIR); each save removes those of
//   its own path whose writer (same host) is gone.
//
// Collective operations (every rank of the communicator calls them, in the
// same order, with the same arguments): the constructor, save, async_save,
// wait, latest, load, steps, and the destructor. poll() is not collective.
// A failure is the same h5dcp::CheckpointError on every rank, as with save
// and load. Without MPI initialized the manager runs as a single process.
//
//   h5dcp::CheckpointManager manager("/scratch/run", {/*keep_last=*/3, /*keep_every=*/1000});
//   if (auto resumed = manager.load(state)) first_step = resumed->step + 1;
//   ...
//   manager.async_save(step, state);   // returns once staged
//   manager.poll();                    // each step: publishes `latest` when the save is done
//   ...
//   manager.wait();                    // before exiting: the last save is complete

#include <mpi.h>

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "h5dcp/async_save.hpp"
#include "h5dcp/options.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {

/// Which checkpoints a manager keeps after each save.
struct Retention {
  int keep_last = 0;            ///< keep the newest N checkpoints; 0 keeps them all
  std::int64_t keep_every = 0;  ///< also keep every step that is a multiple of K, forever; 0: none
};

/// The node-local tier of a manager (issue 50): checkpoints written to each
/// node's own storage (a local SSD, a tmpfs) every few steps, with copies of
/// each node's data on other nodes, so that a job that lost nodes restarts
/// from a recent step without reading the shared file system.
///
/// Saving (CheckpointManager::save and the async saves, for every step that
/// is a multiple of `every_steps`): every rank writes its blocks to its
/// node's directory and sends them over MPI to its `replicas` partner nodes,
/// which write them to theirs; each node then publishes the step (a
/// directory "local-step-<step>" holding one file per owner rank, a
/// checkpoint file with only that rank's blocks written: docs/FORMAT.md)
/// only once every copy on every node is durable, and keeps its newest
/// `keep` steps. Steps that are multiples of `drain_every_steps`, and steps
/// that are not local steps, are also (resp. only) saved to the shared
/// directory as without a tier. The local step is written synchronously,
/// also by async_save (only the shared drain runs in the background).
///
/// Recovering (CheckpointManager::load): every node's first rank checks the
/// local steps its node holds that are newer than the newest shared
/// checkpoint (every copy's identity and checksums), and every rank chooses
/// the same step: the newest of this run whose every owner rank has an
/// intact copy on a node of this job. Each copy is then read on the node
/// that holds it and sent over MPI to the ranks that need its blocks: any
/// rank count, any node set (nodes without copies get everything over MPI),
/// nothing read from the shared directory. With no such step, load() loads
/// the newest shared checkpoint, and says why (last_scan().local). latest()
/// and steps() see the shared directory only.
///
/// The run identity (`run_id`): every local file records it, so that a
/// node's leftovers of another job are never mixed in. Empty: the one
/// recorded in the shared directory (file `local-run-id`), written there by
/// the first manager that uses the directory with a tier:
/// "<SLURM_JOB_ID or nojob>-<UTC time>-<8 hex digits>". A job restarted on
/// the same shared directory (a requeue) keeps its predecessor's identity.
struct LocalTierOptions {
  /// Each node's local directory, every "{node}" replaced by the node's name
  /// (MPI_Get_processor_name's; H5DCP_NODE_NAME overrides it for tests), e.g.
  /// "/local/ckpt/{node}". Without it every node uses the same path, which
  /// must be private to each node (a local disk), never a shared file system.
  std::string directory;
  /// How many other nodes hold a copy of each node's data (>= 0; 0: only the
  /// node's own copy). Copies never go to the node itself, nor to a node of
  /// its group (below): a job with fewer than `replicas` + 1 nodes (groups),
  /// e.g. one restarted on the nodes left, makes as many copies as it can,
  /// with a warning.
  int replicas = 1;
  /// A local checkpoint every N steps (>= 1; every step is the goal).
  std::int64_t every_steps = 1;
  /// Every N steps the local checkpoint is also saved to the shared
  /// directory (>= 0, a multiple of `every_steps`; 0: never, the shared
  /// directory gets only the steps saved there explicitly).
  std::int64_t drain_every_steps = 0;
  /// How many local steps each node keeps (>= 1), the newest.
  int keep = 2;
  /// Failure domains: the group (rack, switch, power domain) of each node
  /// by name; no copy goes to a node of the same group. Every node of the job
  /// needs a group when any is given. Empty: `groups_variable`, else every
  /// node is its own group.
  std::map<std::string, std::string> groups;
  /// The name of an environment variable holding the groups as
  /// "node=group,node=group,..." (whitespace around names ignored), read on
  /// every rank, which must see the same value. Set only one of `groups` and
  /// `groups_variable`; a variable named but unset is an error.
  std::string groups_variable;
  /// This run's identity (see above; at most 256 printable ASCII characters,
  /// no spaces); empty: derived.
  std::string run_id;
};

/// Where a save of a manager with a local tier goes (without one: always
/// the shared directory).
enum class SaveTarget {
  Auto,    ///< a local step to the tier (and, on a drain step, the shared directory too); any other step shared
  Shared,  ///< the shared directory too, whatever the step: a run's last step, a preemption's
};

struct ManagerOptions {
  int coordinator = 0;  ///< rank that lists the directory, writes `latest` and removes old checkpoints
  /// The node-local tier; std::nullopt: none (LocalTierOptions).
  std::optional<LocalTierOptions> local;
};

/// A checkpoint of the directory.
struct CheckpointInfo {
  std::int64_t step = 0;
  std::string path;    ///< DIR/step-<step>.h5; for a local step, its directory's name on each node
  bool local = false;  ///< a step of the node-local tier (LocalTierOptions)
};

/// What the last load() with a local tier found there.
struct LocalRecoveryScan {
  std::optional<std::int64_t> step;   ///< the local step recovered from; none: the shared directory was used
  std::vector<std::string> skipped;   ///< copies not used: "<node>: <file>: <why>"
  std::vector<std::string> rejected;  ///< newer local steps passed over, and why
  std::int64_t bytes_read = 0;        ///< read from local copies, all ranks
  std::int64_t bytes_sent = 0;        ///< sent over MPI from the ranks serving copies to the loading ranks
};

/// A checkpoint file that latest() passed over.
struct SkippedCheckpoint {
  std::int64_t step = 0;
  std::string path;
  std::string reason;  ///< why its metadata could not be read
};

/// What the last latest() (or load()) saw.
struct CheckpointScan {
  std::optional<std::string> pointer;      ///< the file name `latest` held, if it exists
  bool pointer_current = false;            ///< `latest` named the checkpoint chosen
  std::vector<SkippedCheckpoint> skipped;  ///< newer files that are not readable checkpoints
  LocalRecoveryScan local;                 ///< load() with a local tier: what it found there
};

class CheckpointManager {
 public:
  /// Collective over `comm` (duplicates it). Creates `directory` (and its
  /// parents, each new one made durable by an fsync of its parent) when
  /// missing, locks it, and removes orphaned partial files of crashed saves
  /// and temporary `latest` files (names in removed_orphans()). Throws
  /// CheckpointError on every rank when the directory cannot be made, is in
  /// use by another manager (another job, or this process), or cannot be
  /// cleaned; UsageError when ranks pass different directories or options,
  /// or options.local is not valid (LocalTierOptions). With a local tier it also
  /// surveys the ranks' nodes, adopts the run identity, and each node's
  /// first rank creates and locks the node's local directory and removes
  /// its crashed local saves' leftovers (also named in removed_orphans()).
  explicit CheckpointManager(std::string directory, Retention retention = {}, MPI_Comm comm = MPI_COMM_WORLD,
                             ManagerOptions options = {});
  /// Waits for the save in flight and publishes it (errors are printed, not
  /// thrown), then releases the directory lock. Every rank must destroy its
  /// manager, before MPI_Finalize.
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  const std::string& directory() const noexcept { return directory_; }
  const Retention& retention() const noexcept { return retention_; }
  /// The options the manager was made with (the same on every rank).
  const ManagerOptions& options() const noexcept;
  /// DIR/step-<step, 8 digits or more>.h5. Not collective.
  std::string path_for(std::int64_t step) const;
  /// The orphaned files the constructor removed (full paths, every rank).
  const std::vector<std::string>& removed_orphans() const noexcept { return removed_orphans_; }

  /// Saves `state` as step `step`, synchronously (h5dcp::save), after
  /// waiting for any async save in flight; then updates `latest` and
  /// applies the retention policy. Collective. Throws CheckpointError (every
  /// rank) when the save, or publishing `latest`, fails; the previous
  /// checkpoints are then untouched. `step` must be >= 0 (UsageError).
  /// Saves that pass neither a planner nor a plan cache share the manager's
  /// SavePlanCache: a save whose sharding did not change reuses the last
  /// plan (h5dcp/save_plan_cache.hpp). With a local tier, a local step is
  /// written to the tier (LocalTierOptions), and to the shared directory
  /// only when it is also a drain step; a local save that fails leaves the
  /// previous local steps (and shared checkpoints) as they were.
  /// SaveTarget::Shared saves to the shared directory too whatever the step.
  SaveResult save(std::int64_t step, const StateDict& state, const SaveOptions& options = {},
                  SaveTarget target = SaveTarget::Auto);

  /// Starts an async save of `state` as step `step` (as h5dcp::async_save:
  /// returns once this rank's tensors are staged; they may change
  /// afterwards). The manager has its own staging memory
  /// (options.staging_bytes), allocated by its first async save and freed
  /// with the manager; options.coordinator is replaced by the manager's. A
  /// save still in flight is first waited for and published, and its
  /// failure thrown here. `latest` and retention are updated when the save
  /// is done: by poll(), wait(), the next save or the destructor.
  /// Collective. Needs MPI_THREAD_MULTIPLE (UsageError otherwise). The
  /// returned future holds this save's result or CheckpointError. With a
  /// local tier, a local step that is not a drain step returns once this
  /// rank's blocks are copied to host memory; the copies to the partner
  /// nodes, the writes and the publish run in the background, and
  /// latest_local() names the step once poll() or wait() saw it done. A
  /// drain step writes its local step before returning.
  SaveFuture async_save(std::int64_t step, const StateDict& state, const AsyncSaveOptions& options = {},
                        SaveTarget target = SaveTarget::Auto);

  /// As async_save, but returns once the save is planned; the copy into
  /// staging runs on a staging thread (h5dcp::async_stage_and_save): wait on
  /// the returned `staged` before changing the tensors of `state` in place.
  /// Collective; throws as async_save.
  StagedSave async_stage_and_save(std::int64_t step, const StateDict& state, const AsyncSaveOptions& options = {},
                                  SaveTarget target = SaveTarget::Auto);

  /// When the async save in flight has finished: the coordinator points
  /// `latest` at it and applies retention. Never blocks on the save and
  /// never throws (failures are thrown by the next wait(), save or
  /// async_save, on every rank). Returns true when no save is in flight.
  /// Not collective: call it as often as you like (e.g. every step).
  bool poll();

  /// Waits for the async save in flight, if any, publishes it, and returns
  /// its result (std::nullopt when none was in flight). Collective. Throws
  /// the save's CheckpointError, or a CheckpointError when publishing
  /// `latest` failed, on every rank.
  std::optional<SaveResult> wait();

  /// The step of the save in flight, if any. Not collective.
  std::optional<std::int64_t> in_flight() const;

  /// The newest complete checkpoint: the highest step whose file exists and
  /// whose metadata reads back (h5dcp::read_metadata), however stale
  /// `latest` is; std::nullopt when there is none. Files that do not read
  /// back are skipped with a warning (last_scan()). Waits for a save in
  /// flight first. Collective.
  std::optional<CheckpointInfo> latest();

  /// Loads the newest complete checkpoint (latest()) into `state`, in place
  /// (h5dcp::load: any rank count, any sharding). Returns it, or
  /// std::nullopt (and leaves `state` untouched) when the directory holds
  /// none. With a local tier, first the newest recoverable local step newer
  /// than the newest shared one (LocalTierOptions), returned with `local`
  /// set. A local copy found damaged is skipped for the next candidate (a
  /// replica, an older step, the shared directory); copies on a rank's own
  /// node are read straight into `state`, so one found damaged may leave it
  /// partly written: then a later candidate loads every key again, and when
  /// none is left, load() throws Error ("the state is partly written")
  /// rather than return std::nullopt. Collective. Throws CheckpointError
  /// like h5dcp::load, and that Error, on every rank.
  std::optional<CheckpointInfo> load(StateDict& state, const LoadOptions& options = {});

  /// The last local step this manager published on every node, if any
  /// (std::nullopt without a local tier). Not collective.
  std::optional<std::int64_t> latest_local() const noexcept;

  /// What the last latest() or load() saw (same on every rank).
  const CheckpointScan& last_scan() const noexcept { return scan_; }

  /// The steps of the checkpoint files in the directory, ascending (files
  /// named like path_for(); not opened). Collective.
  std::vector<std::int64_t> steps();

 private:
  struct Impl;
  StagedSave start_async_save(std::int64_t step, const StateDict& state, const AsyncSaveOptions& options,
                              bool stage_in_background, SaveTarget target);
  void start_local_tier();
  // `state_written`: a pass found a copy damaged after writing parts of `state`.
  std::optional<CheckpointInfo> recover_local(StateDict& state, const LoadOptions& options, LocalRecoveryScan& scan,
                                              bool& state_written);
  SaveResult save_local(std::int64_t step, const StateDict& state, const SaveOptions& options);   // synchronous
  SaveFuture start_local(std::int64_t step, const StateDict& state, const SaveOptions& options);  // in the background
  bool local_step(std::int64_t step) const;                      // written to the local tier
  bool shared_step(std::int64_t step, SaveTarget target) const;  // written to the shared directory
  std::string directory_;
  Retention retention_;
  std::vector<std::string> removed_orphans_;
  CheckpointScan scan_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace h5dcp
