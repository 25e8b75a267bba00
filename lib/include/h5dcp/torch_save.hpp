#pragma once
// Interop with PyTorch's torch.save files (the zip format of PyTorch >= 1.6),
// both ways, and loading a torch.save file onto N ranks: PyTorch DCP's
// format_utils (dcp_to_torch_save, torch_save_to_dcp,
// BroadcastingTorchSaveReader + DynamicMetaLoadPlanner).
//
// What a torch.save file may hold here: a dict at the top, nested dicts
// (plain or OrderedDict), lists and tuples, dense tensors of the ten dtypes
// h5dcp stores (float64/32/16, bfloat16, int64/32/16/8, uint8, bool: any
// strides, views and storage sharing), and None, bool, int (64-bit), float,
// str and bytes. The data.pkl is read by h5dcp's own reader, so dicts with
// one entry work at any depth (LibTorch 1.13's torch::pickle_load rejects
// them). Mapped on the way in, and so not restored on the way out:
//   - tuples become lists; int and bool dict keys become their text ("0",
//     "True"), as in an optimizer state dict's "state": {0: ...};
//   - OrderedDict becomes a dict and its attributes (a module state dict's
//     _metadata) are dropped; dict order becomes key order;
//   - tensors come back with requires_grad=False and on the CPU.
// Storage sharing: read_torch_save keeps it (views of one storage stay views
// of one storage) and write_torch_save writes it (one record per storage, as
// torch.save). A checkpoint stores every tensor as its own dataset, so after
// a trip through a checkpoint every tensor has a storage of its own: values,
// shapes and dtypes are the same, sharing is not.
//
// Other formats are refused with a clear FormatError: the legacy (non-zip)
// torch.save format says how to re-save the file; other objects (classes,
// sets, sparse or quantized tensors, other dtypes) are named with where they
// are.

#include <mpi.h>

#include <cstdint>
#include <string>

#include "h5dcp/options.hpp"
#include "h5dcp/progress.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {

/// Reads the torch.save file `path` whole into a new state dict (tensors on
/// the CPU, views of shared storages kept). Not collective: holds the whole
/// file in memory; load_torch_save loads onto ranks with less. Throws
/// FormatError when `path` is not a (supported) torch.save file, IoError
/// when it cannot be read.
StateDict read_torch_save(const std::string& path);

/// Writes `state_dict` as a torch.save file at `path` that Python's
/// torch.load reads: tensors that share a storage are written as views of one
/// storage record. Written under a temporary name in the same directory,
/// fsync'd and renamed into place. Not collective. Throws UsageError for
/// what a torch.save file cannot hold here (ShardedTensors: gather them
/// first; tensors of other dtypes or layouts; Stateful objects: pass their
/// state_dict()); IoError when writing fails. PickledObject values are
/// written as Python bytes.
void write_torch_save(const StateDict& state_dict, const std::string& path);

using TorchSaveToCheckpointOptions = ImportOptions;

/// Converts the torch.save file `src` into the checkpoint `dst` (PyTorch DCP's
/// torch_save_to_dcp). Collective over `comm` (single process without MPI):
/// the coordinator reads data.pkl once and shares it; then each rank reads
/// straight from `src` only the blocks it writes (torch.save stores its
/// records uncompressed; an archive re-zipped with compression is refused),
/// so every rank holds at most one block at a time and the write is split
/// across the ranks. `src` must be visible to every rank, as `dst` must.
/// The checkpoint is published
/// atomically, like save(). Throws CheckpointError on every rank, naming the
/// ranks, when anything fails (a FormatError's message for a file that is not
/// a supported torch.save file).
SaveResult torch_save_to_checkpoint(const std::string& src, const std::string& dst,
                                    const TorchSaveToCheckpointOptions& options = {}, MPI_Comm comm = MPI_COMM_WORLD);

struct CheckpointToTorchSaveOptions {
  ProgressCallback progress;  ///< called after each tensor is written
};

/// Converts the checkpoint `src` into the torch.save file `dst` (PyTorch DCP's
/// dcp_to_torch_save), streaming: data.pkl first (it needs only the
/// metadata), then each tensor's storage record is written in pieces of
/// whole rows (at most 64 MiB, or one row where a row is larger), each read
/// from `src` with its checksums checked and then dropped, so memory holds
/// one piece, never a whole tensor. Sharded tensors are written whole. Not
/// collective; runs without MPI. Published atomically (temporary name,
/// fsync, rename); on failure no file is left. Throws FormatError when `src`
/// is not a readable checkpoint or a checksum does not match (naming the
/// tensor and the slab), IoError when writing fails.
void checkpoint_to_torch_save(const std::string& src, const std::string& dst,
                              const CheckpointToTorchSaveOptions& options = {});

struct TorchSaveLoadOptions : LoadOptions {
  /// Upper bound of the tensor bytes the coordinator scatters in one round
  /// (and so of what it stages at once beside the one storage it holds);
  /// blocks larger than this are sent in pieces. Clamped to [4 KiB, 1 GiB].
  std::int64_t max_message_bytes = std::int64_t{64} << 20;
};

/// Loads the torch.save file `path` into `state_dict`, in place, on every
/// rank of `comm` (PyTorch DCP's BroadcastingTorchSaveReader with
/// DynamicMetaLoadPlanner, but scattering instead of broadcasting). Collective.
///
/// Only the coordinator opens the file: it reads data.pkl once and shares it,
/// each rank plans its reads (checked against the file: shapes, dtypes and
/// kinds as in load(); options.strict, options.convert_dtype and
/// options.planner as in load()), and then the coordinator reads each storage
/// once and sends every rank exactly the blocks it holds (plain tensors
/// whole, each shard of a ShardedTensor at its offsets). Memory on the other
/// ranks is their own blocks plus one round of at most
/// options.max_message_bytes; the coordinator holds one storage at a time.
/// Non-tensor values are replaced like load(). Throws CheckpointError on every
/// rank naming the phase and the failing ranks.
LoadResult load_torch_save(StateDict& state_dict, const std::string& path, const TorchSaveLoadOptions& options = {},
                           MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace h5dcp
