#pragma once
// Interop with PyTorch DCP checkpoint directories (what
// torch.distributed.checkpoint.save writes with its FileSystemWriter: a
// `.metadata` pickle and `.distcp` data files), both ways, in C++: no Python
// at run time.
//
// Keys: DCP flattens a nested state dict into keys joined by '.'
// ("model.layer.weight") and records each key's path of dict keys and list
// indices (its planner_data). h5dcp follows that path, so {"model":
// {"layer.weight": t}} saved by DCP converts to the checkpoint fqn
// "model/layer.weight", and back. A list that holds no tensor and no dict is
// one DCP value, as DCP saves it; tuples come back as lists (as from
// torch.save); an empty dict inside a list comes back as an empty dict
// (DCP stores nothing for it). Non-tensor values are the torch.save
// archives DCP writes, read by h5dcp's own pickle reader: int, float, bool,
// None, str, bytes and lists and dicts of them; anything else is a
// FormatError naming its key.
//
// `.metadata` is read with a closed list of allowed classes (DCP's metadata
// dataclasses, torch.Size, dtypes, a layout, a memory-format enum, a
// pathlib path): a pickle naming any other class or function is refused
// before anything is made, and nothing from the file is executed. The
// metadata version must be "1.0.0", which PyTorch 2.13 writes (checked with
// torch 2.13.0); other versions are refused, naming the version.

#include <mpi.h>

#include <cstdint>
#include <string>

#include "h5dcp/options.hpp"
#include "h5dcp/progress.hpp"

namespace h5dcp {

using DcpToCheckpointOptions = ImportOptions;

/// Converts the DCP checkpoint directory `src` into the checkpoint `dst`,
/// every tensor at its global shape and every non-tensor value. Collective
/// over `comm` (one process without MPI), like torch_save_to_checkpoint: the
/// coordinator reads `.metadata` and locates each item's bytes (its
/// torch.save archive's directory), checking them (the chunks must tile
/// their tensor, every item must lie in its data file, be a tensor of the
/// chunk's dtype and size, ...) before anything is written; then each rank
/// reads straight from the `.distcp` files only the blocks it writes (DCP's
/// chunks, split along their rows when large). Published atomically, like
/// save(). Throws CheckpointError on every rank, naming the ranks (a
/// FormatError's message for a directory that is not a DCP checkpoint h5dcp
/// reads, naming the key).
SaveResult dcp_to_checkpoint(const std::string& src, const std::string& dst, const DcpToCheckpointOptions& options = {},
                             MPI_Comm comm = MPI_COMM_WORLD);

/// The coordinator reads the checkpoint's metadata and writes `.metadata`.
struct CheckpointToDcpOptions : CollectiveOptions {
  /// Tensors of at least this many bytes are split along dim 0 across the
  /// ranks (DCP chunks of one rank's rows each); smaller ones are written
  /// whole by one rank (the least loaded).
  std::int64_t split_min_bytes = std::int64_t{1} << 20;
  ProgressCallback progress;  ///< called on each rank for the blocks it writes
};

struct DcpExport {
  std::int64_t tensors = 0;
  std::int64_t bytes = 0;  ///< tensor bytes written
  int files = 0;           ///< .distcp data files written
};

/// Writes the checkpoint `src` as a DCP checkpoint directory `dst` that
/// torch.distributed.checkpoint.load reads on any number of ranks and with
/// any sharding (DTensors or plain tensors), bit for bit. Collective over
/// `comm`: each rank reads its blocks from `src` (checking their checksums)
/// and writes them as items of its own `__<rank>_0.distcp`; the coordinator
/// writes `.metadata` with every rank's items. The directory is written
/// under a temporary name beside `dst`, fsync'd and renamed into place; an
/// existing `dst` is replaced only after the new one is complete. Throws
/// CheckpointError on every rank, naming the ranks (UsageError's message for
/// a dtype DCP's metadata cannot name).
DcpExport checkpoint_to_dcp(const std::string& src, const std::string& dst, const CheckpointToDcpOptions& options = {},
                            MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace h5dcp
