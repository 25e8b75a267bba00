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

#include <cstdint>
#include <string>
#include <vector>

#include "h5dcp/progress.hpp"

namespace h5dcp {

struct VerifyProblem {
  std::string check;    ///< "metadata", "structure", "tiling", "data", "checksums" or "values"
  std::string where;    ///< the fqn, or "" for the file as a whole
  std::string message;  ///< what is wrong, in words
};

struct VerifyReport {
  std::vector<VerifyProblem> problems;
  std::vector<std::string> checks;  ///< the checks that ran, in order
  std::int64_t tensors = 0;         ///< tensors checked
  std::int64_t values = 0;          ///< non-tensor values checked
  std::int64_t containers = 0;      ///< dicts and lists checked
  std::int64_t bytes_read = 0;      ///< tensor bytes read back
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
