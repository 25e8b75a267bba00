#pragma once
// What makes a checkpoint file a node-local tier's copy (issue 50): the root
// attributes naming the run, the step, the owner rank whose blocks it holds
// and the saving job's nodes, and on each tensor the chunks it holds. The
// rest of the file is a normal checkpoint's (every dataset at its global
// shape, every chunk's checksums), with only the owner's blocks written: the
// others are holes, which a sparse file (tmpfs, ext4, xfs) does not store.
// Every value is written in every copy (they are small), so a copy's index
// (read_container_index) reads like a whole checkpoint's.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "h5dcp/metadata.hpp"
#include "hdf5/container_reader.hpp"
#include "hdf5/handle.hpp"

namespace h5dcp::detail {

struct LocalFileIdentity {
  std::string run_id;
  std::int64_t step = 0;
  int owner_rank = 0;                   ///< the rank of the saving job whose blocks the file holds
  int replica = 0;                      ///< 0: the owner's node's own copy; k: the owner's k-th partner's
  std::vector<std::string> nodes;       ///< the saving job's nodes, by name
  std::vector<std::int64_t> rank_node;  ///< each rank's node (an index into `nodes`)
};

/// Writes `identity` as root attributes of the open file `root`.
void write_local_identity(Hid root, const LocalFileIdentity& identity);

/// Writes `step` over the step of the copy open at `root` (written by
/// write_local_identity; the copy rewritten in place for a later step).
void rewrite_local_step(Hid root, std::int64_t step);

/// Records on the tensor dataset `dataset` the owner rank (the writer in the
/// saving job) of each of its chunks, in h5dcp.chunk_offsets' order: the
/// copy holds the chunks of its owner rank.
void write_chunk_owners(Hid dataset, const std::vector<std::int64_t>& owners);

using ChunkOwners = std::map<std::string, std::vector<std::int64_t>>;  ///< each tensor's chunks' owner ranks

/// A copy's index and chunk owners: everything a recovery needs of it but
/// its identity and its blocks.
struct LocalCopyIndex {
  CheckpointIndex index;
  ChunkOwners owners;
};

/// The index (read_container_index) and the chunk owners of the copy at
/// `path` (of a saving job of `world_size` ranks), from one open of the file.
/// Serial. Throws as read_container_index does, and FormatError when an owner
/// list is missing, does not have one entry per chunk, or names a rank
/// outside `world_size`, or a tensor with elements has no checksums; IoError
/// when HDF5 cannot open a tensor's dataset.
LocalCopyIndex read_local_copy_index(const std::string& path, std::int64_t world_size);

/// A checkpoint file's index and, when the file is a local copy, its
/// identity and chunk owners: what verify and the CLI say of a file.
struct CheckpointFileIndex {
  CheckpointIndex index;
  std::optional<LocalFileIdentity> local;  ///< std::nullopt: not a local copy
  ChunkOwners owners;                      ///< a local copy's; empty otherwise
};

/// The same from one open of `path`, whatever checkpoint it is. Serial.
/// Throws as read_container_index (with `require_exact_tiling`),
/// read_local_identity and read_local_copy_index do.
CheckpointFileIndex read_checkpoint_file_index(const std::string& path, bool require_exact_tiling);

/// The identity of the local copy at `path`; throws FormatError when it is
/// not one (no h5dcp.local.* attributes, or inconsistent ones).
LocalFileIdentity read_local_identity(const std::string& path);

}  // namespace h5dcp::detail
