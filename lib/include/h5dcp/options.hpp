#pragma once
// Options and results of save and load. Plain data, no torch, no HDF5.

#include <cstdint>
#include <string>
#include <vector>

#include "h5dcp/metadata.hpp"
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

struct SaveOptions {
  int coordinator = 0;  ///< rank that plans, publishes and names the checkpoint
  IoMode io_mode = IoMode::Collective;
  /// How long a phase waits for the slowest rank before the ranks that
  /// arrived fail naming those that did not: 0 = $H5DCP_TIMEOUT_SECONDS or
  /// 1800 s; negative = forever.
  double timeout_seconds = 0;
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

struct LoadOptions {
  int coordinator = 0;             ///< rank that reads the metadata once and shares it
  bool strict = true;              ///< missing keys are an error (else reported in LoadResult)
  bool convert_dtype = false;      ///< convert a stored dtype to the state dict's instead of refusing
  bool verify_checksums = true;    ///< check every block read against its stored checksums
  double timeout_seconds = 0;      ///< as SaveOptions::timeout_seconds
  LoadPlanner* planner = nullptr;  ///< nullptr: DefaultLoadPlanner(strict, convert_dtype)
};

struct LoadResult {
  std::vector<std::string> missing_keys;     ///< requested by this rank, not in the checkpoint (non-strict)
  std::vector<std::string> unexpected_keys;  ///< in the checkpoint, not requested by this rank (ignored)
};

struct ReadMetadataOptions {
  int coordinator = 0;         ///< rank that reads the file once and shares what it read
  double timeout_seconds = 0;  ///< as SaveOptions::timeout_seconds
};

/// How load_all lays out the tensors it creates.
enum class LoadLayout {
  Whole,        ///< every rank gets every tensor whole, as a plain tensor
  ShardedDim0,  ///< tensors are ShardedTensors split along dim 0 like torch.chunk (0-d ones stay whole)
};

struct LoadAllOptions {
  int coordinator = 0;
  LoadLayout layout = LoadLayout::Whole;
  bool verify_checksums = true;  ///< check every block read against its stored checksums
  double timeout_seconds = 0;    ///< as SaveOptions::timeout_seconds
};

}  // namespace h5dcp
