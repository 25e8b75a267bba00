#pragma once
// The plans that save and load exchange and that planners (h5dcp/planner.hpp)
// produce. Plain data: no torch, no HDF5, no MPI.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "h5dcp/metadata.hpp"

namespace h5dcp {

using Shape = std::vector<std::int64_t>;

// --- save -------------------------------------------------------------------

enum class WriteItemType : std::uint8_t {
  Tensor,  ///< a whole plain (replicated) tensor
  Shard,   ///< one local shard of a sharded tensor
  Value,   ///< a non-tensor value, already encoded
};

/// One thing a rank can write.
struct WriteItem {
  MetadataIndex index;  ///< fqn; for shards also offsets and the local shard index
  WriteItemType type = WriteItemType::Tensor;
  DType dtype = DType::Float32;  ///< tensors only
  Shape global_shape;            ///< tensors only
  ChunkStorageMetadata chunk;    ///< tensors only: the block, in global coordinates
  std::string encoding;          ///< values only: "int", "float", "bool", "str", "bytes", "pickle", "none"
  std::string payload;           ///< values only: the encoded value (docs/FORMAT.md)
};

/// What one rank holds: its items and the containers (dicts/lists, by fqn)
/// of its state dict, so that empty ones and lists survive.
struct SavePlan {
  std::vector<WriteItem> items;
  std::vector<std::pair<std::string, ContainerKind>> containers;
};

/// A unique block of a tensor and the rank that writes it.
struct PlannedChunk {
  ChunkStorageMetadata chunk;
  int writer = 0;
  std::size_t writer_shard_index = 0;  ///< hint into the writer's local shards
};

/// One tensor dataset of the checkpoint.
struct PlannedTensor {
  std::string fqn;
  DType dtype = DType::Float32;
  Shape global_shape;
  bool sharded = false;
  std::vector<PlannedChunk> chunks;  ///< sorted by offsets
};

/// One non-tensor value and the rank that writes it.
struct PlannedValue {
  std::string fqn;
  std::string encoding;
  std::string payload;
  int writer = 0;
};

/// The global plan, identical on every rank: every group and dataset to
/// create (creation is collective in parallel HDF5, so every rank needs all)
/// and who writes what.
struct GlobalSavePlan {
  std::vector<std::pair<std::string, ContainerKind>> containers;  ///< sorted: parents first
  std::vector<PlannedTensor> tensors;                             ///< sorted by fqn
  std::vector<PlannedValue> values;                               ///< sorted by fqn
  std::string temp_path;  ///< where the file is written before publishing (set by save)
  std::string created;    ///< ISO-8601 UTC time of the save (set by save)
  int world_size = 0;

  /// Bytes each rank writes (index = rank): tensors' blocks and values.
  std::vector<std::int64_t> bytes_per_rank() const;
};

// --- load -------------------------------------------------------------------

enum class ReadItemType : std::uint8_t { Tensor, Value };

/// One read: the block `lengths` at `storage_offsets` of the stored tensor
/// `storage_fqn` into the block at `dest_offsets` of the destination tensor
/// that `dest_index` names in the state dict. For values, the stored value
/// `storage_fqn` into the value at `dest_index.fqn`.
struct ReadItem {
  ReadItemType type = ReadItemType::Tensor;
  MetadataIndex dest_index;
  Shape dest_offsets;
  std::string storage_fqn;
  Shape storage_offsets;
  Shape lengths;
  DType dtype = DType::Float32;  ///< the stored dtype
  /// The saved chunks (indices into the tensor's metadata chunks) the block
  /// overlaps: what verifies it.
  std::vector<std::size_t> source_chunks;
};

struct LoadPlan {
  std::vector<ReadItem> items;
  std::vector<std::string> missing;     ///< requested but not in the checkpoint (non-strict loads)
  std::vector<std::string> unexpected;  ///< in the checkpoint but not requested
};

}  // namespace h5dcp
