#pragma once
// Verifying a checkpoint file: everything a reader relies on, checked without
// loading it into a state dict. The checks are a list that grows with the
// format; today they are:
//   metadata   the file is HDF5; the root attributes, every group's and
//              dataset's attributes, key escaping, dtypes against HDF5 types,
//              chunk bounds and the values' own checksums are well-formed and
//              right (what load() reads first);
//   structure  every list holds the elements 0..n-1;
//   tiling     each tensor's saved chunks tile its global shape exactly;
//   data       every byte of every tensor reads back, and bool tensors hold
//              only 0 and 1;
//   checksums  every slab of every saved chunk matches the checksum stored
//              with it (files that carry checksums; older ones skip this);
//   values     every non-tensor value decodes (payload size, UTF-8 text).
// A node-local tier's copy (docs/FORMAT.md: one owner rank's blocks, the
// others holes) is verified as what it is: the blocks it holds.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "h5dcp/progress.hpp"

namespace h5dcp {

struct VerifyProblem {
  std::string check;    ///< "metadata", "structure", "tiling", "data", "checksums" or "values"
  std::string where;    ///< the fqn, or "" for the file as a whole
  std::string message;  ///< what is wrong, in words
};

/// What a node-local tier's copy (CheckpointManager's LocalTierOptions)
/// holds: the blocks one rank of the saving job wrote, of one step of one run.
struct LocalCopySummary {
  std::string run_id;
  std::int64_t step = 0;
  int owner_rank = 0;                   ///< whose blocks
  int replica = 0;                      ///< 0: the owner's node's own copy; k: its k-th partner node's
  std::vector<std::string> nodes;       ///< the saving job's nodes
  std::vector<std::int64_t> rank_node;  ///< the node of each rank of the saving job
  std::int64_t chunks_held = 0;         ///< the owner's chunks, of all tensors
  std::int64_t chunks_total = 0;        ///< the chunks of all tensors
};

/// The summary of the local copy at `path`; std::nullopt when the file is a
/// checkpoint but not a local copy. Not collective. Throws FormatError when
/// it is not a readable checkpoint or its local attributes are damaged,
/// IoError when it cannot be read.
std::optional<LocalCopySummary> read_local_copy_summary(const std::string& path);

struct VerifyReport {
  std::vector<VerifyProblem> problems;
  std::vector<std::string> checks;  ///< the checks that ran, in order
  std::int64_t tensors = 0;         ///< tensors checked
  std::int64_t values = 0;          ///< non-tensor values checked
  std::int64_t containers = 0;      ///< dicts and lists checked
  std::int64_t bytes_read = 0;      ///< tensor bytes read back
  /// Set for a local copy: only its owner's chunks are read and checked
  /// (tiling: the chunks of every owner still tile each tensor).
  std::optional<LocalCopySummary> local_copy;
  bool ok() const noexcept { return problems.empty(); }
};

struct VerifyOptions {
  ProgressCallback progress;                              ///< called after each tensor
  std::int64_t max_block_bytes = std::int64_t{64} << 20;  ///< tensors are read in blocks of at most this
};

/// Verifies the checkpoint at `path` (see above). Not collective (serial
/// reads; MPI need not be initialized). A damaged file is reported, not
/// thrown: the report lists every problem found (a file whose metadata cannot
/// be read has that one problem). Throws IoError only when `path` does not
/// exist or is not a readable regular file.
VerifyReport verify_checkpoint(const std::string& path, const VerifyOptions& options = {});

}  // namespace h5dcp
