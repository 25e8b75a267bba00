#pragma once
// Collective save and load of a state dict into one parallel HDF5 file.
//
// Call-order rule: save, load and read_metadata are collective over `comm`:
// every rank of `comm` calls them, in the same order, with the same path and
// options. A failure on any rank (bad input, an I/O error, an exception in any
// phase) makes every rank throw the same CheckpointError naming the phase and
// the failing ranks with their messages; no rank is left waiting.
//
// Without MPI initialized, they run as a single process (comm is ignored).
// With MPI, h5dcp needs no thread support beyond MPI_THREAD_SINGLE for these
// calls: they run on the calling thread.

#include <mpi.h>

#include <string>

#include "h5dcp/metadata.hpp"
#include "h5dcp/options.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {

/// Saves `state_dict` to the checkpoint file `path`. Collective over `comm`.
///
/// Ranks may hold different keys; a key held by several ranks must have the
/// same global shape and dtype everywhere; plain tensors are written once, by
/// one of the ranks holding them; shards of a ShardedTensor must tile its
/// global shape exactly. The file is written under a temporary name in the
/// same directory, made durable (fsync), and renamed to `path` only when every
/// rank succeeded: a reader never sees a partial checkpoint, and on failure an
/// existing checkpoint at `path` is untouched and the temporary file removed.
///
/// Returns the metadata of the written checkpoint (on every rank).
/// Throws CheckpointError (on every rank) when any rank fails.
Metadata save(const StateDict& state_dict, const std::string& path, const SaveOptions& options = {},
              MPI_Comm comm = MPI_COMM_WORLD);

/// Loads the checkpoint at `path` into the tensors of `state_dict`, in place.
/// Collective over `comm`.
///
/// Each rank reads exactly the blocks it holds: plain tensors are read whole,
/// each shard of a ShardedTensor from its offsets, whatever sharding and rank
/// count saved the file. Every key of `state_dict` must be in the checkpoint
/// with the same global shape and dtype; keys in the file that are not
/// requested are ignored.
/// Throws CheckpointError (on every rank) naming the phase, the ranks and the
/// keys when anything is missing, mismatched or unreadable.
void load(StateDict& state_dict, const std::string& path, const LoadOptions& options = {},
          MPI_Comm comm = MPI_COMM_WORLD);

/// Reads a checkpoint's metadata: the coordinator reads it once and shares it.
/// Collective over `comm`. Throws CheckpointError when the file is missing,
/// not an h5dcp checkpoint or written by a newer major format version.
Metadata read_metadata(const std::string& path, const LoadOptions& options = {},
                       MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace h5dcp
