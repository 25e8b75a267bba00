#pragma once
// Pure save planning (no MPI, no HDF5, no torch): local plans in, the global
// plan out. The coordinator runs create_global_save_plan over every rank's
// local plan; every rank then writes the chunks assigned to it.

#include <cstdint>
#include <string>
#include <vector>

#include "h5dcp/metadata.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

/// One block a rank can write: a whole replicated tensor or one shard.
struct WriteItem {
  MetadataIndex index;  ///< fqn, plus offsets and local shard index for shards
  DType dtype = DType::Float32;
  Shape global_shape;
  ChunkStorageMetadata chunk;
  bool sharded = false;  ///< false: a plain (replicated) tensor, chunk = whole
};

/// What one rank holds, in state-dict order.
struct SavePlan {
  std::vector<WriteItem> items;
};

/// A unique chunk and the rank that writes it.
struct PlannedChunk {
  ChunkStorageMetadata chunk;
  int writer = 0;
  std::size_t writer_shard_index = 0;  ///< index hint into the writer's local shards
};

/// One dataset of the checkpoint.
struct PlannedTensor {
  std::string fqn;
  DType dtype = DType::Float32;
  Shape global_shape;
  bool sharded = false;
  std::vector<PlannedChunk> chunks;  ///< sorted by offsets
};

/// The global plan, identical on every rank: every dataset to create (dataset
/// creation is collective in parallel HDF5, so every rank needs all of them)
/// and who writes what.
struct GlobalSavePlan {
  std::vector<PlannedTensor> tensors;  ///< sorted by fqn
  std::string temp_path;               ///< where the file is written before publishing
  std::string created;                 ///< ISO-8601 UTC time of the save
  int world_size = 0;
};

/// Checks one rank's own items (shard ranks, bounds, consistent dtype within
/// a key). Throws UsageError naming the key and shard.
void validate_local_plan(const SavePlan& plan);

/// Merges the local plans (index = rank): keys must agree across ranks on
/// dtype, global shape and kind; identical chunks held by several ranks are
/// written once, by the holder with the fewest bytes assigned so far; the
/// unique chunks of each key must tile its global shape exactly. Throws
/// UsageError naming the key, the ranks, and the offending boxes.
GlobalSavePlan create_global_save_plan(const std::vector<SavePlan>& local_plans);

/// Bytes each rank writes under `plan` (index = rank).
std::vector<std::int64_t> bytes_per_rank(const GlobalSavePlan& plan);

}  // namespace h5dcp::detail
