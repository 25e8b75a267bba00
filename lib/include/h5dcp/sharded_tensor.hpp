#pragma once
// A tensor sharded across ranks: its global shape plus the blocks this rank
// holds. Any N-d block sharding is allowed, several shards per rank included;
// the shards of all ranks together must tile the global shape exactly (save
// checks it collectively). Shards held by several ranks (replicas, e.g. the
// same tensor-parallel shard on every data-parallel rank) are written once.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace h5dcp {

/// One block of a sharded tensor: the local data and where it starts in the
/// global tensor (one offset per dimension).
struct Shard {
  at::Tensor tensor;
  std::vector<std::int64_t> offsets;
};

/// Where a local tensor sits in a global one: the global shape and the
/// offsets of the local block. Describes sharded parameters and optimizer
/// state (dim-0 / ZeRO / FSDP style, tensor-parallel blocks, or both).
struct BlockLayout {
  std::vector<std::int64_t> global_shape;
  std::vector<std::int64_t> offsets;
};

/// The block of dim 0 that `rank` of `world` holds when a tensor of
/// `global_shape` is split like torch.chunk: ceil(rows / world) rows each,
/// the last ranks fewer or none. Not collective.
BlockLayout chunk_dim0(const std::vector<std::int64_t>& global_shape, int rank, int world);

/// The local sizes of `layout` given the rows it holds: see chunk_dim0.
std::vector<std::int64_t> chunk_dim0_sizes(const std::vector<std::int64_t>& global_shape, int rank, int world);

class ShardedTensor {
 public:
  ShardedTensor() = default;
  /// Not collective; shapes are checked by save/load, collectively.
  ShardedTensor(std::vector<std::int64_t> global_shape, std::vector<Shard> local_shards)
      : global_shape_(std::move(global_shape)), local_shards_(std::move(local_shards)) {}

  const std::vector<std::int64_t>& global_shape() const noexcept { return global_shape_; }
  const std::vector<Shard>& local_shards() const noexcept { return local_shards_; }
  std::vector<Shard>& local_shards() noexcept { return local_shards_; }

 private:
  std::vector<std::int64_t> global_shape_;
  std::vector<Shard> local_shards_;
};

}  // namespace h5dcp
