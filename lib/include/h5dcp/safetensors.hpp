#pragma once
// Interop with Hugging Face safetensors files, both ways: a checkpoint's
// tensors exported as one `.safetensors` file or as a sharded directory
// (`model-0000k-of-0000n.safetensors` and `model.safetensors.index.json`),
// written in parallel; a safetensors file, index or directory converted into
// a checkpoint, or loaded straight onto N ranks, each rank reading only its
// blocks.
//
// Names: a tensor's safetensors name is its fqn below `prefix` with its keys
// unescaped and joined by '/': {"model": {"layer.weight": t}} exported with
// prefix "model" is "layer.weight", Hugging Face's own naming; without a
// prefix it is "model/layer.weight". Importing splits names at '/' into
// nested dicts, so an export imports back to the same tree.
// The header's `__metadata__` (string to string) is the dict `__metadata__`
// of str values at the top of the (prefixed) tree, both ways.
// dtypes: safetensors names 19 of h5dcp's 21 (F64 ... BOOL, U16/32/64, the
// five float8 variants as F8_E4M3, F8_E5M2, F8_E4M3FNUZ, F8_E5M2FNUZ,
// F8_E8M0, and C64); complex32 and complex128 have no safetensors name and
// are refused, naming the tensor.

#include <mpi.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "h5dcp/options.hpp"
#include "h5dcp/progress.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {

/// The coordinator reads the metadata, lays out the files and publishes them.
struct CheckpointToSafetensorsOptions : CollectiveOptions {
  /// Only tensors under this fqn ("model" or "model/"), named relative to it.
  std::string prefix;
  /// Only these tensors, or the tensors under these dicts (fqns as in the
  /// checkpoint, prefix included); empty: every tensor under the prefix. A
  /// key that selects nothing is a UsageError.
  std::vector<std::string> keys;
  /// 0: one file at DST. Otherwise DST is a directory of shards of at most
  /// this many bytes of tensor data each (a larger tensor gets a shard of its
  /// own) and model.safetensors.index.json, as Hugging Face writes them.
  std::int64_t max_shard_size = 0;
  /// Added to the header's __metadata__ (over the checkpoint's own).
  std::map<std::string, std::string> metadata;
  /// Tensors of at least this many bytes are split along dim 0 across the
  /// ranks; smaller ones are written whole by one rank (the least loaded).
  std::int64_t split_min_bytes = std::int64_t{1} << 20;
  ProgressCallback progress;  ///< called on each rank for the blocks it writes
};

struct SafetensorsExport {
  std::vector<std::string> files;  ///< the files written (shards first, then the index), as published
  std::int64_t tensors = 0;
  std::int64_t bytes = 0;                   ///< tensor bytes written
  std::vector<std::string> skipped_values;  ///< fqns of non-tensor values selected but not storable in safetensors
};

/// Exports the tensors of the checkpoint `src` to safetensors at `dst`
/// (see above). Collective over `comm`: the coordinator lays out the
/// file(s) and writes the headers, then every rank reads its blocks from
/// `src` (checking their checksums) and writes them at their offsets
/// (pwrite), so the data is written in parallel; the coordinator fsyncs and
/// publishes atomically (a temporary name renamed into place; a sharded
/// export is a directory renamed into place). An existing `dst` is replaced
/// only after the new one is complete. Throws CheckpointError on every rank,
/// naming the ranks (UsageError's message for a dtype safetensors lacks, a
/// key holding '/', a selection that selects nothing).
SafetensorsExport checkpoint_to_safetensors(const std::string& src, const std::string& dst,
                                            const CheckpointToSafetensorsOptions& options = {},
                                            MPI_Comm comm = MPI_COMM_WORLD);

using SafetensorsToCheckpointOptions = ImportOptions;

/// Converts safetensors into the checkpoint `dst`: `src` is a `.safetensors`
/// file, a `*.safetensors.index.json` with the shards beside it, or a
/// directory holding one of those. Collective over `comm`, like
/// torch_save_to_checkpoint: the coordinator reads and checks the headers
/// (offsets, lengths, dtypes: a file that lies is refused before anything is
/// written) and shares them; then each rank reads straight from the files
/// only the blocks it writes. Published atomically, like save(). Throws
/// CheckpointError on every rank naming the ranks (a FormatError's message
/// for a file that is not valid safetensors).
SaveResult safetensors_to_checkpoint(const std::string& src, const std::string& dst,
                                     const SafetensorsToCheckpointOptions& options = {},
                                     MPI_Comm comm = MPI_COMM_WORLD);

/// Loads safetensors (`path`: a file, an index or a directory, as above)
/// into `state_dict`, in place, on every rank of `comm`, with any sharding:
/// the coordinator reads and checks the headers once and shares them, each
/// rank plans its reads against them (shapes, dtypes, keys: options.strict,
/// options.convert_dtype and options.planner as in load()), then reads
/// straight from the files only the blocks it holds (plain tensors whole,
/// each shard of a ShardedTensor at its offsets). Names map to fqns as above
/// ("model/layer.weight" is {"model": {"layer.weight": ...}}); the
/// __metadata__ strings load into a "__metadata__" dict when the state dict
/// has one. safetensors carries no checksums: options.verify_checksums does
/// not apply. Collective. Throws CheckpointError on every rank naming the
/// phase and the failing ranks.
LoadResult load_safetensors(StateDict& state_dict, const std::string& path, const LoadOptions& options = {},
                            MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace h5dcp
