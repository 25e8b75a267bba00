#pragma once
// Collective save and load of a state dict into one parallel HDF5 file.
//
// Call-order rule: save, load, load_all and read_metadata are collective over
// `comm`: every rank of `comm` calls them, in the same order, with the same
// path and coordinator (checked: ranks that differ all get a UsageError). A
// failure on any rank (bad input, an I/O error, an exception in any phase)
// makes every rank throw the same CheckpointError naming the phase and the
// failing ranks with their messages; no rank is left waiting.
//
// Without MPI initialized they run as a single process (comm is ignored).
// They run on the calling thread and need only MPI_THREAD_SINGLE.

#include <mpi.h>

#include <string>

#include "h5dcp/metadata.hpp"
#include "h5dcp/options.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {

/// Saves `state_dict` to the checkpoint file `path`. Collective over `comm`.
///
/// Ranks may hold different keys; a key held by several ranks must have the
/// same kind, global shape and dtype (and, for values, the same value)
/// everywhere; plain tensors and values are written once, by the holder with
/// the fewest bytes so far; the shards of a ShardedTensor must tile its global
/// shape exactly. The file is written under a temporary name in the same
/// directory, made durable (fsync), and renamed to `path` only when every rank
/// succeeded: a reader never sees a partial checkpoint; on failure an existing
/// checkpoint at `path` is untouched and the temporary file removed.
///
/// Returns what was written and the bytes each rank wrote (on every rank).
/// Throws CheckpointError (on every rank) when any rank fails; UsageError (on
/// every rank) when ranks pass different paths or coordinators.
SaveResult save(const StateDict& state_dict, const std::string& path, const SaveOptions& options = {},
                MPI_Comm comm = MPI_COMM_WORLD);

/// Loads the checkpoint at `path` into `state_dict`, in place. Collective.
///
/// Each rank reads exactly the blocks it holds: plain tensors whole, each
/// shard of a ShardedTensor at its offsets, whatever sharding and rank count
/// saved the file. Tensors must match the stored global shape and dtype
/// (options.convert_dtype converts dtypes); non-tensor values are replaced by
/// the stored ones. Keys in the file that are not requested are ignored and
/// reported. Missing keys fail the load (options.strict) or are reported.
/// Throws CheckpointError (on every rank) naming the phase, the ranks and the
/// keys when anything is missing, mismatched or unreadable.
LoadResult load(StateDict& state_dict, const std::string& path, const LoadOptions& options = {},
                MPI_Comm comm = MPI_COMM_WORLD);

/// Loads a whole checkpoint into a new nested state dict built from its
/// metadata: every tensor whole on every rank, or split along dim 0 across
/// ranks (options.layout). Collective. Throws CheckpointError like load.
StateDict load_all(const std::string& path, const LoadAllOptions& options = {}, MPI_Comm comm = MPI_COMM_WORLD);

/// Reads a checkpoint's metadata: the coordinator reads it once and shares
/// it (only it needs to see the file). Collective. Throws CheckpointError
/// when the file is missing, not an h5dcp checkpoint, damaged, or written
/// by a newer major format version.
Metadata read_metadata(const std::string& path, const ReadMetadataOptions& options = {},
                       MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace h5dcp
