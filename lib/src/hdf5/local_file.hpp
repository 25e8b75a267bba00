#pragma once
// What makes a checkpoint file a node-local tier's copy (issue 50): the root
// attributes naming the run, the step, the owner rank whose blocks it holds
// and the saving job's nodes, and on each tensor the chunks it holds. The
// rest of the file is a normal checkpoint's (every dataset at its global
// shape, every chunk's checksums), with only the owner's blocks written: the
// others are holes, which a sparse file (tmpfs, ext4, xfs) does not store.

#include <cstdint>
#include <string>
#include <vector>

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

/// Marks the tensor dataset `dataset` as holding its chunks `chunks`
/// (indices into its h5dcp.chunk_offsets rows). Not called for a tensor the
/// file holds nothing of.
void write_held_chunks(Hid dataset, const std::vector<std::int64_t>& chunks);

/// The identity of the local copy at `path`; throws FormatError when it is
/// not one (no h5dcp.local.* attributes, or inconsistent ones).
LocalFileIdentity read_local_identity(const std::string& path);

}  // namespace h5dcp::detail
