#pragma once
// Options and results of save and load. Plain data, no torch, no HDF5.

#include <cstdint>
#include <string>
#include <vector>

#include "h5dcp/metadata.hpp"
#include "h5dcp/progress.hpp"
#include "h5dcp/save_plan_cache.hpp"

namespace h5dcp {

class SavePlanner;
class LoadPlanner;

/// How ranks write their shards into the shared datasets.
enum class IoMode {
  /// MPI-IO collective writes where they help: for tensors whose blocks are
  /// scattered through the file (column or grid shards), two-phase I/O
  /// aggregates them. Tensors with one writer, or whose every block is one
  /// contiguous range of the file (row shards), are written independently.
  Collective,
  Independent,  ///< each rank writes its own hyperslabs on its own, always
};

/// What every collective operation is told; every rank passes the same (the
/// ranks check, and fail naming the ranks that differ).
struct CollectiveOptions {
  /// The rank that does the one-rank work: plans a save, reads metadata once
  /// and shares it, publishes and names what is written.
  int coordinator = 0;
  /// How long a phase waits for the slowest rank before the ranks that
  /// arrived fail naming those that did not: 0 = $H5DCP_TIMEOUT_SECONDS or
  /// 1800 s; negative = forever.
  double timeout_seconds = 0;
};

/// read_metadata() needs nothing more.
using ReadMetadataOptions = CollectiveOptions;

struct SaveOptions : CollectiveOptions {
  IoMode io_mode = IoMode::Collective;
  SavePlanner* planner = nullptr;  ///< nullptr: DefaultSavePlanner
  /// Reuse the global plan of the last save through this cache when no rank's
  /// sharding changed (h5dcp/save_plan_cache.hpp); nullptr: plan every save.
  /// Every rank passes one or none.
  SavePlanCache* plan_cache = nullptr;
};

struct SaveResult {
  Metadata metadata;                         ///< what was written (same on every rank)
  std::vector<std::int64_t> bytes_per_rank;  ///< bytes each rank wrote: replicated values count once
  bool plan_reused = false;                  ///< the plan came from SaveOptions::plan_cache
};

struct LoadOptions : CollectiveOptions {
  bool strict = true;              ///< missing keys are an error (else reported in LoadResult)
  bool convert_dtype = false;      ///< convert a stored dtype to the state dict's instead of refusing
  bool verify_checksums = true;    ///< check every block read against its stored checksums
  LoadPlanner* planner = nullptr;  ///< nullptr: DefaultLoadPlanner(strict, convert_dtype)
};

struct LoadResult {
  std::vector<std::string> missing_keys;     ///< requested by this rank, not in the checkpoint (non-strict)
  std::vector<std::string> unexpected_keys;  ///< in the checkpoint, not requested by this rank (ignored)
};

/// How load_all lays out the tensors it creates.
enum class LoadLayout {
  Whole,        ///< every rank gets every tensor whole, as a plain tensor
  ShardedDim0,  ///< tensors are ShardedTensors split along dim 0 like torch.chunk (0-d ones stay whole)
};

struct LoadAllOptions : CollectiveOptions {
  LoadLayout layout = LoadLayout::Whole;
  bool verify_checksums = true;  ///< check every block read against its stored checksums
};

/// Imports of another format into a checkpoint: torch_save_to_checkpoint,
/// dcp_to_checkpoint, safetensors_to_checkpoint. The coordinator reads the
/// source's index once and plans the save.
struct ImportOptions : CollectiveOptions {
  /// Tensors of at least this many bytes are split along dim 0 across the
  /// ranks (each rank reads and writes its rows); smaller ones, and 0-d or
  /// empty ones, are written whole by one rank (the least loaded).
  std::int64_t split_min_bytes = std::int64_t{1} << 20;
  IoMode io_mode = IoMode::Collective;
  ProgressCallback progress;  ///< called on each rank for the tensor blocks it writes
};

}  // namespace h5dcp
