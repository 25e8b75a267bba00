#pragma once
// Asynchronous saves (the seeds' async_save): the caller blocks only while
// planning and while its blocks are copied into host staging memory; one
// background thread writes, syncs and publishes the checkpoint.
//
// - Staging memory is bounded (AsyncOptions::staging_bytes), allocated and
//   touched once when the saver is made, and reused by every save (pinned
//   when LibTorch has CUDA). When a rank's blocks exceed it, they stream
//   through it: the caller then also waits while the overflow is written.
// - The background thread owns every HDF5 call of the save and uses its own
//   duplicate of the communicator, so the caller may keep using MPI on its
//   own communicators meanwhile; that needs MPI_THREAD_MULTIPLE
//   (MPI_Init_thread), checked when the saver is made.
// - A new save while one is in flight first waits for it to finish.
// - A failure on any rank, in the foreground or the background, becomes the
//   same CheckpointError in every rank's future; no rank waits forever.
// - Other h5dcp calls (load, save) while a save is in flight wait for it:
//   HDF5 is used by one thread at a time.
// - Background saves write with independent MPI-IO (each rank streams its own
//   blocks); the files are the same as from save().

#include <mpi.h>

#include <cstdint>
#include <future>
#include <memory>
#include <string>

#include "h5dcp/options.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {

struct AsyncOptions {
  std::int64_t staging_bytes = std::int64_t{256} << 20;  ///< host staging memory per rank
  double timeout_seconds = 0;                            ///< as SaveOptions::timeout_seconds, for the background phases
};

/// What the last save() of a saver cost its caller.
struct AsyncStats {
  double blocking_seconds = 0;     ///< time save() blocked (plan + staging)
  std::int64_t staged_bytes = 0;   ///< bytes this rank copied into staging
  std::int64_t staging_bytes = 0;  ///< size of the staging memory
  int staging_allocations = 0;     ///< times staging memory was allocated (1 for the saver's life)
};

class AsyncSaver {
 public:
  /// Collective over `comm` (duplicates it). Allocates and touches the
  /// staging memory. Throws UsageError when MPI is initialized without
  /// MPI_THREAD_MULTIPLE, or for a staging size below 4 KiB.
  explicit AsyncSaver(MPI_Comm comm = MPI_COMM_WORLD, AsyncOptions options = {});
  /// Waits for the save in flight, if any, then stops the thread. Every rank
  /// must destroy its saver (the wait ends in collective steps).
  ~AsyncSaver();
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;

  /// Starts saving `state_dict` to `path`, like h5dcp::save (same checks,
  /// same file, same atomic publishing). Collective over the saver's
  /// communicator. Returns once this rank's blocks are staged: the tensors
  /// may then change. The future holds the SaveResult or the CheckpointError.
  /// options.timeout_seconds, when not 0, is this save's timeout for all its
  /// phases (foreground and background); 0 keeps AsyncOptions::timeout_seconds.
  /// Like every option it must be the same on every rank (UsageError naming
  /// the rank that differs).
  std::future<SaveResult> save(const StateDict& state_dict, const std::string& path, const SaveOptions& options = {});

  /// Blocks until no save is in flight. Not collective.
  void wait();

  AsyncStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// async_save with a process-wide saver per communicator (made on first use
/// with default options). Collective over `comm`. Call finish_async_saves()
/// before MPI_Finalize.
std::future<SaveResult> async_save(const StateDict& state_dict, const std::string& path,
                                   const SaveOptions& options = {}, MPI_Comm comm = MPI_COMM_WORLD);

/// Waits for and destroys the process-wide savers of async_save. Collective
/// over every communicator async_save was used with.
void finish_async_saves();

}  // namespace h5dcp
