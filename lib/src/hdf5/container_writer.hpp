#pragma once
// Writes a checkpoint file from a global save plan.

#include <mpi.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "h5dcp/options.hpp"
#include "hdf5/handle.hpp"
#include "plan/save_plan.hpp"

namespace h5dcp::detail {

/// Where the bytes of one chunk are: contiguous, in host memory, in the
/// chunk's dtype, kept alive by the pointer's owner.
using ChunkSource = std::function<std::shared_ptr<const void>(const PlannedTensor&, const PlannedChunk&)>;

class ContainerWriter {
 public:
  /// Creates `path` and every dataset of `plan` with its attributes (dataset
  /// and attribute creation are collective: every rank passes the same plan).
  /// Serial when `comm` is MPI_COMM_NULL.
  ContainerWriter(const std::string& path, MPI_Comm comm, const GlobalSavePlan& plan);

  /// Writes the chunks `rank` is the writer of, taking their bytes from
  /// `source`. Collective in IoMode::Collective. A failure (in `source` or in
  /// HDF5) does not stop the rank from taking part in the remaining
  /// collective writes (with empty selections), so no rank waits for it; the
  /// first failure is thrown at the end.
  void write_chunks(int rank, IoMode mode, const ChunkSource& source);

  /// Closes every dataset and the file. Collective. Throws on failure.
  void close();

 private:
  std::string path_;
  MPI_Comm comm_;
  const GlobalSavePlan& plan_;
  Handle file_;
  std::vector<Handle> datasets_;  // one per plan_.tensors entry
  std::vector<Handle> types_;     // file (= memory) type per dataset
};

}  // namespace h5dcp::detail
