#pragma once
// Asynchronous saves (PyTorch DCP's async_save): the caller blocks only while
// the save is planned and its blocks are copied into host staging memory;
// a background thread writes, syncs and publishes the checkpoint. With
// async_stage_and_save (DCP's async staging) the caller blocks only for the
// plan: the copy runs on a thread too, and the caller waits for it (the
// `staged` handle) just before it next changes the tensors.
//
// - Same file, same checks, same options and same atomic publishing as
//   h5dcp::save (any coordinator, io_mode, timeout_seconds for every phase,
//   in the foreground and the background).
// - Staging memory is bounded (AsyncSaveOptions::staging_bytes), allocated
//   and touched once, by the first async save, and reused by every later one
//   that asks for the same size (pinned when a GPU is present). When a
//   rank's blocks exceed it, they stream through it: the caller then also
//   waits while the overflow is written, and blocks are written with
//   independent MPI-IO whatever io_mode says (when every rank's blocks fit,
//   io_mode applies as in save()).
// - The background thread uses its own duplicate of the communicator, so
//   the caller may keep using MPI on its own communicators meanwhile; that
//   needs MPI_THREAD_MULTIPLE (MPI_Init_thread), checked by every call.
// - One save in flight at a time: a new async save first waits for the one
//   in flight (a CheckpointManager has staging memory of its own); other
//   h5dcp calls that read or write files (load, save) wait for it too (HDF5
//   is used by one thread at a time).
// - A failure on any rank, in the foreground or the background, becomes the
//   same CheckpointError in every rank's future; no rank waits forever.
// - Tensors on a GPU are copied on a side CUDA stream that first waits for
//   the work queued on the calling thread's current stream at the call (so a
//   kernel queued just before that changes a tensor is saved with it); work
//   on other streams must be ordered before the call by the caller. Each
//   piece's copy is an event waited for by the staging thread alone, never
//   the whole device; `staged` (and async_save's return) comes once every
//   copy is in host memory.

#include <mpi.h>

#include <cstdint>
#include <future>
#include <string>

#include "h5dcp/options.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {

/// The outcome of a save in flight: its SaveResult, or the CheckpointError
/// every rank got. Shared: any number of copies may wait for it.
using SaveFuture = std::shared_future<SaveResult>;

struct AsyncSaveOptions : SaveOptions {
  /// Host staging memory per rank, at least 4096 bytes. Like every option it
  /// must be the same on every rank.
  std::int64_t staging_bytes = std::int64_t{256} << 20;
};

/// What the last async save cost its caller, on this rank.
struct AsyncStats {
  double blocking_seconds = 0;      ///< time the call blocked (plan, + staging unless background_staging)
  double staging_seconds = 0;       ///< time the copy into staging took (0 until it is done)
  bool background_staging = false;  ///< the copy ran on a staging thread (async_stage_and_save)
  std::int64_t staged_bytes = 0;    ///< bytes this rank copied into staging (0 until the copy is done)
  std::int64_t staging_bytes = 0;   ///< size of the staging memory
  int staging_allocations =
      0;  ///< staging allocations since the first async save or finish_async_saves(): 1, +1 per new size
};

/// Starts saving `state_dict` to `path`, like h5dcp::save. Collective over
/// `comm`. Returns once this rank's blocks are staged: the tensors may then
/// change. Throws (on every rank) UsageError when ranks pass different
/// paths or options (naming the rank that differs), when MPI is initialized
/// without MPI_THREAD_MULTIPLE, or for staging_bytes below 4096; throws
/// CheckpointError (on every rank) when planning fails on any rank. Every
/// later failure (staging, writing, publishing) is in the future.
SaveFuture async_save(const StateDict& state_dict, const std::string& path, const AsyncSaveOptions& options = {},
                      MPI_Comm comm = MPI_COMM_WORLD);

/// An async save whose staging runs in the background too.
struct StagedSave {
  /// Ready once this rank's blocks are copied into staging memory (or its
  /// copy stopped on a failure, which `saved` then holds): from then on the
  /// tensors may change. Never holds an exception.
  std::shared_future<void> staged;
  /// The save's SaveResult, or the CheckpointError every rank got.
  SaveFuture saved;
};

/// Starts saving `state_dict` to `path` like async_save, but returns once
/// the save is planned: this rank's blocks are copied into staging memory by
/// a staging thread meanwhile. Until `staged` is ready the caller must not
/// change any of the tensors in place (wait on it just before, e.g., the
/// optimizer step); it may compute, and use MPI, meanwhile. The tensors (and
/// what Stateful values returned) are kept alive by the save; a planner in
/// options must stay alive until `staged` is ready, and its resolve_tensor
/// is called from the staging thread. Collective over `comm`; throws as
/// async_save does; every failure after planning is in `saved`.
StagedSave async_stage_and_save(const StateDict& state_dict, const std::string& path,
                                const AsyncSaveOptions& options = {}, MPI_Comm comm = MPI_COMM_WORLD);

/// The costs of this process's last async save. Not collective.
AsyncStats last_async_save_stats();

/// Waits for the async save in flight, if any, then frees the staging
/// memory and stops the background thread. Not collective (the save's
/// remaining steps run on every rank's own thread), but every rank should
/// call it, or wait for its futures, before MPI_Finalize. Its failure stays
/// in the future; this never throws.
void finish_async_saves();

}  // namespace h5dcp
