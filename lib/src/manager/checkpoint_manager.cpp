// CheckpointManager: step checkpoints in a directory, an atomic `latest`
// pointer, retention, resuming from the newest complete checkpoint, and
// removal of orphaned partial files.
//
// Who does what: every rank takes part in the saves and loads (h5dcp::save,
// the async save engine, h5dcp::read_metadata, h5dcp::load); only the coordinator
// touches the directory itself (listing, `latest`, retention, orphans) and
// shares what it saw or what failed through the exception-robust steps of
// detail::Comm, so a failure there is still the same CheckpointError on
// every rank.

#include "h5dcp/checkpoint_manager.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <set>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "api/async_save_engine.hpp"
#include "api/checkpoint_session.hpp"
#include "api/local_load.hpp"
#include "api/local_save.hpp"
#include "api/save_steps.hpp"
#include "base/background_thread.hpp"
#include "base/byte_codec.hpp"
#include "base/exception_text.hpp"
#include "comm/comm.hpp"
#include "comm/plain_calls.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/save_plan_cache.hpp"
#include "manager/local_tier.hpp"
#include "manager/step_names.hpp"
#include "storage/checkpoint_directory.hpp"
#include "storage/directory_publish.hpp"

namespace h5dcp {
namespace {

constexpr std::string_view kPrefix = "step-";
constexpr std::string_view kSuffix = ".h5";
constexpr const char* kPointer = "latest";

std::string file_name_for(std::int64_t step) { return detail::step_name(kPrefix, step, kSuffix); }

// Steps of the checkpoint files, ascending.
std::vector<std::int64_t> list_steps(const std::string& dir) { return detail::list_step_names(dir, kPrefix, kSuffix); }

// Which orphans to remove: with the directory locked no other manager uses
// it, so every temporary file but one whose writer provably still runs (a
// plain h5dcp::save into the directory on this host); without the lock,
// only those whose writer is provably gone.
bool may_remove(const std::string& name, bool locked) {
  const auto writer = detail::temporary_writer(name, kPointer);
  if (!writer) return false;
  return locked ? *writer != detail::WriterState::Alive : *writer == detail::WriterState::Gone;
}

// The steps that retention removes once `saved` is published.
std::vector<std::int64_t> steps_to_remove(const std::vector<std::int64_t>& ascending, const Retention& r,
                                          std::int64_t saved) {
  std::vector<std::int64_t> remove;
  const auto n = static_cast<std::int64_t>(ascending.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const auto step = ascending[static_cast<std::size_t>(i)];
    const bool newest = r.keep_last <= 0 || i >= n - r.keep_last;
    const bool milestone = r.keep_every > 0 && step % r.keep_every == 0;
    if (!newest && !milestone && step != saved) remove.push_back(step);
  }
  return remove;
}

// `latest` := the new checkpoint of `step`, then retention's removals.
void publish(const std::string& dir, const Retention& retention, std::int64_t step) {
  detail::write_pointer(dir, kPointer, file_name_for(step));
  for (const auto old : steps_to_remove(list_steps(dir), retention, step)) {
    const auto path = dir + "/" + file_name_for(old);
    detail::remove_file(path, "removing the old checkpoint '" + path + "'");
  }
}

}  // namespace

struct CheckpointManager::Impl {
  MPI_Comm user_comm;
  detail::Comm comm;
  ManagerOptions options;
  detail::AsyncSaveSlot saver;  // its own engine: staging freed with the manager
  SavePlanCache plan_cache;     // for saves that bring no planner and no cache

  struct InFlight {
    std::int64_t step;
    SaveFuture future;
    bool local_only = false;  // a step of the local tier alone: nothing to publish in the directory
  };
  std::optional<InFlight> in_flight;
  std::thread local_writer;  // an async local step's background thread (joined once its future is ready)
  // The last async save, once finished, until wait() reports it.
  std::optional<SaveResult> finished;
  std::exception_ptr save_failure;              // the same on every rank
  std::string publish_failure;                  // the coordinator's only
  std::unique_ptr<detail::DirectoryLock> lock;  // the coordinator's only

  // The node-local tier (options.local).
  struct Local {
    detail::ReplicaPlacement placement;
    std::string run_id;
    std::string directory;                             // this rank's node's
    bool node_leader = false;                          // the first rank of its node: it owns the directory
    std::unique_ptr<detail::DirectoryLock> node_lock;  // the node leader's only
    std::optional<std::int64_t> latest;                // the last step published on every node
    std::set<std::int64_t> published;                  // the node leader's: the steps this job published
    std::optional<std::string> spare;                  // the node leader's: publish_local_step's
    // The step being written, whose buffers the next step reuses: one at a
    // time (every save first waits for the one in flight).
    std::shared_ptr<detail::StagedLocalStep> staged = std::make_shared<detail::StagedLocalStep>();
  };
  std::optional<Local> local;

  Impl(MPI_Comm c, const ManagerOptions& o) : user_comm(c), comm(c, o.coordinator), options(o) {}

  // A session of its own for each local step, as h5dcp::save has: its
  // deadline (a partner that dies mid-copy fails the step, not the manager's
  // communicator).
  std::unique_ptr<detail::CheckpointSession> local_session(const std::string& directory,
                                                           const SaveOptions& save_options) const {
    return std::make_unique<detail::CheckpointSession>(user_comm, options.coordinator, "local save", directory,
                                                       save_options.timeout_seconds,
                                                       detail::save_settings(save_options));
  }

  // The step's directory made (each node's first rank), the step planned
  // and staged; in the caller's thread, where the ranks arrive together.
  void stage_local(const detail::Comm& c, std::int64_t step, const StateDict& state, const SaveOptions& save_options) {
    const auto partial = local->directory + "/" + detail::partial_local_step_name(step);
    try {
      c.all_gather("local:prepare", [&] {
        if (local->node_leader) detail::prepare_local_step(local->directory, step, std::exchange(local->spare, {}));
        return detail::Bytes();
      });
      detail::stage_local_step(c, state, save_options, partial, *local->staged);
    } catch (...) {
      if (local->node_leader) detail::remove_local_step_directory(partial);
      throw;
    }
  }

  SaveResult write_local(const detail::Comm& c, std::int64_t step, detail::StagedLocalStep& staged) {
    auto& local = *this->local;
    const auto partial = local.directory + "/" + detail::partial_local_step_name(step);
    try {
      auto result = detail::write_local_step(c, staged, {step, local.run_id, &local.placement, partial});
      // Every copy of every rank is durable: each node puts its step in place.
      c.all_gather("local:publish", [&] {
        if (!local.node_leader) return detail::Bytes();
        // A step this job wrote may be kept as the next step's spare: its
        // copies' layout is known to the ranks that wrote them.
        local.published.insert(step);
        local.spare = detail::publish_local_step(local.directory, partial, step, options.local->keep,
                                                 [&](std::int64_t old) { return local.published.count(old) > 0; });
        local.published.erase(local.published.begin(), local.published.lower_bound(step - 1024));
        return detail::Bytes();
      });
      return result;
    } catch (...) {
      if (local.node_leader) detail::remove_local_step_directory(partial);
      throw;
    }
  }
};

CheckpointManager::CheckpointManager(std::string directory, Retention retention, MPI_Comm comm, ManagerOptions options)
    : directory_(std::move(directory)), retention_(retention) {
  while (directory_.size() > 1 && directory_.back() == '/') directory_.pop_back();
  impl_ = std::make_unique<Impl>(comm, options);
  auto& c = impl_->comm;
  c.require_same("checkpoint directories", directory_);
  c.require_same("retention policies",
                 std::to_string(retention_.keep_last) + "/" + std::to_string(retention_.keep_every));
  if (directory_.empty()) throw UsageError("h5dcp: CheckpointManager needs a directory");
  if (retention_.keep_last < 0 || retention_.keep_every < 0)
    throw UsageError("h5dcp: Retention::keep_last and keep_every must be >= 0");
  c.require_same("CheckpointManager", detail::local_tier_settings(options.local));
  if (options.local) detail::validate_local_tier(*options.local);
  const auto removed = c.broadcast("checkpoint-manager:start", [&] {
    detail::create_directories_durably(directory_);
    // Before anything in the directory is touched: a second job's manager
    // must not remove the first one's save in progress.
    impl_->lock = std::make_unique<detail::DirectoryLock>(directory_);
    std::vector<std::string> orphans;
    for (const auto& name : detail::list_names(directory_))
      if (may_remove(name, impl_->lock->locked())) orphans.push_back(directory_ + "/" + name);
    for (const auto& path : orphans) detail::remove_file(path, "removing '" + path + "'");
    return detail::encode_message(orphans);
  });
  removed_orphans_ = detail::ByteReader::decode<std::vector<std::string>>(removed);
  if (options.local) start_local_tier();
}

void CheckpointManager::start_local_tier() {
  auto& impl = *impl_;
  const auto& tier = *impl.options.local;
  const auto& c = impl.comm;
  Impl::Local local;
  // A job that lost nodes must still recover: fewer copies than asked when
  // it has too few nodes (groups) for them, and a warning.
  local.placement = detail::survey_local_tier(c, tier, /*fit=*/true);
  const auto& p = local.placement;
  if (p.replicas < tier.replicas && c.is_coordinator())
    std::fprintf(stderr,
                 "h5dcp: warning: checkpoint manager: the local tier asks for %d copies of each node's data on other "
                 "nodes, but this job's %zu nodes allow %d (each copy on another node, outside the node's group)\n",
                 tier.replicas, p.nodes.size(), p.replicas);
  const auto node = static_cast<std::size_t>(p.node_of_rank.at(static_cast<std::size_t>(c.rank())));
  local.directory = detail::local_directory_for(tier.directory, p.nodes[node]);
  local.node_leader = p.node_ranks[node].front() == c.rank();
  local.run_id = tier.run_id.empty()
                     ? c.broadcast("checkpoint-manager:run-id", [&] { return detail::adopt_run_id(directory_); })
                     : tier.run_id;
  c.all_gather("checkpoint-manager:local-start", [&] {
    if (local.node_leader) {
      detail::create_directories_durably(local.directory);
      detail::mark_node_directory(local.directory, p.nodes[node]);
    }
    return detail::Bytes();
  });
  // Every node marked its directory: one that holds another node's mark is
  // not node-local, and two nodes' steps (of the same names) would collide.
  const auto removed = c.all_gather("checkpoint-manager:local-check", [&] {
    if (!local.node_leader) return detail::Bytes();
    const auto sharing = detail::nodes_sharing_directory(local.directory, p.nodes[node], p.nodes);
    if (!sharing.empty()) {
      std::string names;
      for (const auto& other : sharing) names += (names.empty() ? "" : ", ") + other;
      throw UsageError("h5dcp: checkpoint manager: the local tier's directory '" + local.directory + "' of node " +
                       p.nodes[node] + " is also that of node " + names +
                       " (a shared file system?): each node needs a directory of its own, on node-local storage "
                       "or with '{node}' in LocalTierOptions::directory");
    }
    local.node_lock = std::make_unique<detail::DirectoryLock>(local.directory);
    return detail::encode_message(detail::remove_local_orphans(local.directory));
  });
  for (const auto& r : removed)
    if (!r.empty())
      for (auto& path : detail::ByteReader::decode<std::vector<std::string>>(r))
        removed_orphans_.push_back(std::move(path));
  impl.local = std::move(local);
}

std::optional<std::int64_t> CheckpointManager::latest_local() const noexcept {
  return impl_->local ? impl_->local->latest : std::nullopt;
}

SaveResult CheckpointManager::save_local(std::int64_t step, const StateDict& state, const SaveOptions& options) {
  auto& impl = *impl_;
  const auto session = impl.local_session(directory_, options);
  impl.stage_local(session->comm(), step, state, options);
  auto result = impl.write_local(session->comm(), step, *impl.local->staged);
  impl_->local->latest = step;
  return result;
}

SaveFuture CheckpointManager::start_local(std::int64_t step, const StateDict& state, const SaveOptions& options) {
  auto& impl = *impl_;
  detail::require_thread_multiple("async saves");
  std::shared_ptr<detail::CheckpointSession> session = impl.local_session(directory_, options);
  // The caller waits for the copy only; the rest runs on a thread of its
  // own, with the session (its communicator, deadline and HDF5 gate).
  impl.stage_local(session->comm(), step, state, options);
  auto staged = impl.local->staged;
  session->hand_over();
  auto promise = std::make_shared<std::promise<SaveResult>>();
  SaveFuture future = promise->get_future().share();
  auto write = [&impl, step, session, staged, promise]() mutable {
    std::optional<SaveResult> result;
    std::exception_ptr failure;
    try {
      result = impl.write_local(session->comm(), step, *staged);
    } catch (...) {
      failure = std::current_exception();
    }
    // The gate is given back (in this thread) before the caller can wake.
    session.reset();
    staged.reset();
    if (failure)
      promise->set_exception(failure);
    else
      promise->set_value(std::move(*result));
  };
  try {
    impl.local_writer = std::thread([write]() mutable {
      detail::run_as_background_thread();
      write();
    });
  } catch (const std::system_error&) {
    write();  // no thread to be had: written here, as a sync save
  }
  impl.in_flight = Impl::InFlight{step, future, true};
  return future;
}

CheckpointManager::~CheckpointManager() {
  auto& impl = *impl_;
  if (impl.in_flight) {
    impl.in_flight->future.wait();
    poll();
  }
  if (impl.comm.is_coordinator()) {
    if (impl.save_failure) {
      try {
        std::rethrow_exception(impl.save_failure);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "h5dcp: checkpoint manager: the last async save failed: %s\n",
                     detail::exception_text(e).c_str());
      }
    }
    if (!impl.publish_failure.empty())
      std::fprintf(stderr, "h5dcp: checkpoint manager: %s\n", impl.publish_failure.c_str());
  }
  impl.saver.finish();  // waits for nothing: no save is in flight any more
  impl.lock.reset();    // the directory is free for the next manager
  // A spare no later step will reuse: the tier keeps its `keep` steps only.
  if (impl.local && impl.local->spare) detail::remove_local_step_directory(*impl.local->spare);
}

const ManagerOptions& CheckpointManager::options() const noexcept { return impl_->options; }

std::string CheckpointManager::path_for(std::int64_t step) const { return directory_ + "/" + file_name_for(step); }

std::optional<std::int64_t> CheckpointManager::in_flight() const {
  if (!impl_->in_flight) return std::nullopt;
  return impl_->in_flight->step;
}

bool CheckpointManager::poll() {
  auto& impl = *impl_;
  if (!impl.in_flight) return true;
  if (impl.in_flight->future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
  const auto step = impl.in_flight->step;
  const bool local_only = impl.in_flight->local_only;
  if (impl.local_writer.joinable()) impl.local_writer.join();
  try {
    impl.finished = impl.in_flight->future.get();
  } catch (...) {
    impl.save_failure = std::current_exception();
  }
  impl.in_flight.reset();
  if (local_only) {
    if (!impl.save_failure) impl.local->latest = step;
  } else if (!impl.save_failure && impl.comm.is_coordinator()) {
    // Published (the future is ready only after the rename): point at it.
    try {
      publish(directory_, retention_, step);
    } catch (const std::exception& e) {
      impl.publish_failure = detail::exception_text(e);
    }
  }
  return true;
}

std::optional<SaveResult> CheckpointManager::wait() {
  auto& impl = *impl_;
  if (impl.in_flight) {
    impl.in_flight->future.wait();
    poll();
  }
  // The save's own failure is the same CheckpointError on every rank.
  if (impl.save_failure) {
    auto failure = std::exchange(impl.save_failure, nullptr);
    impl.finished.reset();
    std::rethrow_exception(failure);
  }
  // Publishing is the coordinator's: its failure becomes everyone's.
  impl.comm.broadcast("checkpoint-manager:publish", [&] {
    if (!impl.publish_failure.empty()) throw IoError(std::exchange(impl.publish_failure, std::string()));
    return detail::Bytes();
  });
  return std::exchange(impl.finished, std::nullopt);
}

SaveResult CheckpointManager::save(std::int64_t step, const StateDict& state, const SaveOptions& options,
                                   SaveTarget target) {
  auto& impl = *impl_;
  if (step < 0) throw UsageError("h5dcp: checkpoint steps must be >= 0, not " + std::to_string(step));
  wait();
  auto o = options;
  o.coordinator = impl.options.coordinator;
  if (o.planner == nullptr && o.plan_cache == nullptr) o.plan_cache = &impl.plan_cache;
  if (local_step(step)) {
    // A step the tier already holds, saved again for the shared directory
    // (after a preemption), is not written to the tier twice.
    const bool held = target == SaveTarget::Shared && impl.local->latest == step;
    if (!held) {
      auto local = save_local(step, state, o);
      if (!shared_step(step, target)) return local;
    }
  }
  auto result = h5dcp::save(state, path_for(step), o, impl.user_comm);
  impl.comm.broadcast("checkpoint-manager:publish", [&] {
    publish(directory_, retention_, step);
    return detail::Bytes();
  });
  return result;
}

SaveFuture CheckpointManager::async_save(std::int64_t step, const StateDict& state, const AsyncSaveOptions& options,
                                         SaveTarget target) {
  return start_async_save(step, state, options, false, target).saved;
}

StagedSave CheckpointManager::async_stage_and_save(std::int64_t step, const StateDict& state,
                                                   const AsyncSaveOptions& options, SaveTarget target) {
  return start_async_save(step, state, options, true, target);
}

StagedSave CheckpointManager::start_async_save(std::int64_t step, const StateDict& state,
                                               const AsyncSaveOptions& options, bool stage_in_background,
                                               SaveTarget target) {
  auto& impl = *impl_;
  if (step < 0) throw UsageError("h5dcp: checkpoint steps must be >= 0, not " + std::to_string(step));
  wait();
  auto o = options;
  o.coordinator = impl.options.coordinator;
  if (o.planner == nullptr && o.plan_cache == nullptr) o.plan_cache = &impl.plan_cache;
  if (local_step(step)) {
    if (!shared_step(step, target)) {
      // Staged before returning (a copy in host memory), written, copied
      // to the partners and published in the background.
      auto saved = start_local(step, state, o);
      std::promise<void> staged;
      staged.set_value();
      return StagedSave{staged.get_future().share(), saved};
    }
    // A drain step: the local step first, then the shared file as any
    // async save (the two would take turns on the HDF5 gate anyway).
    save_local(step, state, o);
  }
  auto handles = impl.saver.save(state, path_for(step), o, impl.user_comm, stage_in_background);
  impl.in_flight = Impl::InFlight{step, handles.saved};
  return handles;
}

bool CheckpointManager::local_step(std::int64_t step) const {
  const auto& tier = impl_->options.local;
  return tier && step % tier->every_steps == 0;
}

bool CheckpointManager::shared_step(std::int64_t step, SaveTarget target) const {
  const auto& tier = impl_->options.local;
  if (!tier || target == SaveTarget::Shared || step % tier->every_steps != 0) return true;
  return tier->drain_every_steps > 0 && step % tier->drain_every_steps == 0;
}

std::vector<std::int64_t> CheckpointManager::steps() {
  const auto listing =
      impl_->comm.broadcast("checkpoint-manager:list", [&] { return detail::encode_message(list_steps(directory_)); });
  return detail::ByteReader::decode<std::vector<std::int64_t>>(listing);
}

std::optional<CheckpointInfo> CheckpointManager::latest() {
  auto& impl = *impl_;
  if (impl.in_flight) {  // its failure, if any, stays for the next wait()
    impl.in_flight->future.wait();
    poll();
  }
  const auto listing = impl.comm.broadcast("checkpoint-manager:list", [&] {
    return detail::encode_message(std::pair(list_steps(directory_), detail::read_pointer(directory_, kPointer)));
  });
  auto [ascending, pointer] =
      detail::ByteReader::decode<std::pair<std::vector<std::int64_t>, std::optional<std::string>>>(listing);
  scan_ = CheckpointScan{};
  scan_.pointer = std::move(pointer);
  for (auto it = ascending.rbegin(); it != ascending.rend(); ++it) {
    const auto path = path_for(*it);
    try {
      read_metadata(path, {impl.options.coordinator}, impl.user_comm);
    } catch (const Error& e) {
      scan_.skipped.push_back(SkippedCheckpoint{*it, path, e.what()});
      if (impl.comm.is_coordinator())
        std::fprintf(stderr, "h5dcp: warning: checkpoint manager: skipping '%s', not a readable checkpoint: %s\n",
                     path.c_str(), e.what());
      continue;
    }
    scan_.pointer_current = scan_.pointer == file_name_for(*it);
    return CheckpointInfo{*it, path};
  }
  return std::nullopt;
}

std::optional<CheckpointInfo> CheckpointManager::recover_local(StateDict& state, const LoadOptions& options,
                                                               LocalRecoveryScan& scan, bool& state_written) {
  auto& impl = *impl_;
  const auto& local = *impl.local;
  if (impl.in_flight) {  // its failure, if any, stays for the next wait()
    impl.in_flight->future.wait();
    poll();
  }
  // Only the names of the shared checkpoints: nothing is read there.
  const auto shared_steps = steps();
  const detail::CheckpointSession session(
      impl.user_comm, impl.options.coordinator, "local load", directory_, options.timeout_seconds,
      {{"strict", detail::bool_text(options.strict)}, {"convert_dtype", detail::bool_text(options.convert_dtype)}});
  const auto& c = session.comm();
  const auto shared = shared_steps.empty() ? std::nullopt : std::optional<std::int64_t>(shared_steps.back());
  const auto& p = local.placement;
  const auto node_of = [&](int rank) {
    return p.nodes[static_cast<std::size_t>(p.node_of_rank[static_cast<std::size_t>(rank)])];
  };
  // The local steps newer than the shared one that any node holds (names
  // only), then their copies checked one step at a time, newest first: the
  // usual recovery checks one step, not every step kept.
  std::vector<std::int64_t> mine;  // the node leader's: listed once
  if (local.node_leader)
    for (const auto step : detail::list_local_steps(local.directory))
      if (!shared || step > *shared) mine.push_back(step);
  std::set<std::int64_t, std::greater<>> candidates;
  for (const auto& listed :
       c.all_gather("local:list", [&] { return local.node_leader ? detail::encode_message(mine) : detail::Bytes(); }))
    if (!listed.empty())
      for (const auto step : detail::ByteReader::decode<std::vector<std::int64_t>>(listed)) candidates.insert(step);
  // Each candidate step's copies surveyed (identity, index), then loaded
  // from; a copy found damaged as it is served is passed over for a replica
  // or an older step, and the load tried again (nothing loaded meanwhile).
  detail::LocalStepChoice choice;
  detail::LocalRecoverySources sources;
  detail::LocalRecoveryResult recovered;
  for (const auto step : candidates) {
    auto reports = detail::gather_node_reports(c, [&]() -> std::optional<detail::SurvivingNodeReport> {
      if (!local.node_leader) return std::nullopt;
      std::vector<detail::LocalStepDirectory> dirs;
      if (std::find(mine.begin(), mine.end(), step) != mine.end())
        dirs.push_back({step, local.directory + "/" + detail::local_step_name(step)});
      return detail::survey_local_copies(node_of(c.rank()), dirs);
    });
    while (true) {
      choice = detail::choose_local_step(local.run_id, shared, reports);
      if (!choice.step) break;
      sources = detail::LocalRecoverySources{*choice.step, {}, {}, {}};
      for (const auto& source : choice.sources) {
        const auto node = std::find(p.nodes.begin(), p.nodes.end(), source.node);
        if (node == p.nodes.end())
          throw Error("h5dcp: checkpoint manager: the local copies' node " + source.node + " is not in this job");
        // The node's ranks share its owners' copies to serve.
        const auto& ranks = p.node_ranks[static_cast<std::size_t>(node - p.nodes.begin())];
        sources.server.push_back(ranks[sources.server.size() % ranks.size()]);
        sources.files.push_back(source.file);
        sources.here.push_back(source.node == node_of(c.rank()));
      }
      auto o = options;
      o.coordinator = impl.options.coordinator;
      recovered = detail::load_from_local_copies(c, state, o, sources);
      state_written = state_written || recovered.state_written;
      if (recovered.damaged.empty()) break;
      detail::mark_damaged(reports, choice, recovered.damaged);
    }
    for (const auto& skipped : choice.skipped)
      scan.skipped.push_back(skipped.node + ": " + skipped.file + ": " + skipped.reason);
    scan.rejected.insert(scan.rejected.end(), choice.rejected.begin(), choice.rejected.end());
    if (choice.step) break;
  }
  if (c.is_coordinator()) {
    for (const auto& line : scan.skipped)
      std::fprintf(stderr, "h5dcp: warning: checkpoint manager: local copy skipped: %s\n", line.c_str());
    for (const auto& line : scan.rejected)
      std::fprintf(stderr, "h5dcp: warning: checkpoint manager: %s\n", line.c_str());
  }
  if (!choice.step) return std::nullopt;
  const auto& counts = recovered.counts;
  scan.step = sources.step;
  scan.bytes_read = counts.bytes_read;
  scan.bytes_sent = counts.bytes_received;
  return CheckpointInfo{sources.step, detail::local_step_name(sources.step), true};
}

std::optional<CheckpointInfo> CheckpointManager::load(StateDict& state, const LoadOptions& options) {
  LocalRecoveryScan local_scan;
  bool state_written = false;
  if (impl_->local) {
    if (auto recovered = recover_local(state, options, local_scan, state_written)) {
      scan_ = CheckpointScan{};
      scan_.local = std::move(local_scan);
      return recovered;
    }
    if (impl_->comm.is_coordinator() && !local_scan.rejected.empty())
      std::fprintf(stderr,
                   "h5dcp: checkpoint manager: no local step can be recovered; loading the shared directory's newest "
                   "checkpoint\n");
  }
  auto found = latest();
  // A local pass that found a copy damaged may have written parts of the
  // state (copies on a rank's own node are read in place): only a load of
  // every key makes it whole again. The same on every rank (the damage was
  // gathered), so every rank throws alike.
  if (!found && state_written)
    throw Error(
        "h5dcp: checkpoint manager: a local copy was found damaged after parts of the state were loaded "
        "from it, no other local step could be loaded and the shared directory holds no checkpoint: the "
        "state is partly written and must not be used (" +
        (local_scan.skipped.empty() ? std::string("no copy named") : local_scan.skipped.front()) + ")");
  scan_.local = std::move(local_scan);
  if (!found) return std::nullopt;
  auto o = options;
  o.coordinator = impl_->options.coordinator;
  h5dcp::load(state, found->path, o, impl_->user_comm);
  return found;
}

}  // namespace h5dcp
