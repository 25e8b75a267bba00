#pragma once
// The engine behind async_save and CheckpointManager::async_save: staging
// memory and the background thread that writes, syncs and publishes. Each
// save brings its CheckpointSession (agreement, timeout, coordinator, the
// HDF5 gate, the duplicated communicator), set up exactly as for save(); the
// engine plans in the caller's thread and stages there (async_save) or on a
// staging thread of its own (async_stage_and_save), and hands the session to
// the background thread, which gives the gate back when the save is done.

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "h5dcp/async_save.hpp"

namespace h5dcp::detail {

class CheckpointSession;

class AsyncSaveEngine {
 public:
  /// Allocates and touches `staging_bytes` of staging memory (pinned when a
  /// GPU is present) and starts the background thread. Not collective.
  explicit AsyncSaveEngine(std::int64_t staging_bytes);
  /// Waits for the save in flight, then stops the thread.
  ~AsyncSaveEngine();
  AsyncSaveEngine(const AsyncSaveEngine&) = delete;
  AsyncSaveEngine& operator=(const AsyncSaveEngine&) = delete;

  std::int64_t staging_bytes() const noexcept;
  /// Blocks until no save is in flight. Not collective.
  void wait_idle();
  /// Plans the save of `session` (collective over its communicator), stages
  /// this rank's blocks (before returning, or on a staging thread when
  /// `stage_in_background`) and leaves the rest to the background thread,
  /// which takes over the session. No save may be in flight (wait_idle()).
  StagedSave start(std::unique_ptr<CheckpointSession> session, const StateDict& state_dict, const std::string& path,
                   const SaveOptions& options, std::chrono::steady_clock::time_point started, bool stage_in_background);
  AsyncStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Where async saves run: one engine, made by the first save and remade
/// when a save asks for another staging size. The process has one (for
/// h5dcp::async_save), each CheckpointManager its own. Thread-safe: saves
/// started from several threads run one after another.
class AsyncSaveSlot {
 public:
  AsyncSaveSlot() = default;
  ~AsyncSaveSlot() { finish(); }
  AsyncSaveSlot(const AsyncSaveSlot&) = delete;
  AsyncSaveSlot& operator=(const AsyncSaveSlot&) = delete;

  /// async_save's steps: waits for the save in flight, sets up the session
  /// (as save() does, plus the staging size), (re)makes the engine in a
  /// collective step, then starts the save. Collective over `comm`.
  StagedSave save(const StateDict& state_dict, const std::string& path, const AsyncSaveOptions& options, MPI_Comm comm,
                  bool stage_in_background);
  /// Waits, then frees the engine. Not collective; never throws.
  void finish() noexcept;
  AsyncStats stats() const;

 private:
  // Recursive: an async save started from inside one (from a planner or a
  // Stateful) then fails cleanly on the HDF5 gate (UsageError) instead of
  // deadlocking here.
  mutable std::recursive_mutex callers_;
  std::unique_ptr<AsyncSaveEngine> engine_;
  int allocations_ = 0;  // engines made (each allocates its staging memory)
};

}  // namespace h5dcp::detail
