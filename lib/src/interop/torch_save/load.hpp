#pragma once
// load_torch_save's implementation, with what tests measure: the tensor
// bytes each rank received (exactly its own blocks) and the rounds it took.

#include <mpi.h>

#include <cstdint>
#include <string>

#include "h5dcp/torch_save.hpp"

namespace h5dcp::detail {

struct TorchLoadStats {
  std::int64_t bytes_received = 0;  ///< tensor bytes this rank received
  std::int64_t rounds = 0;          ///< scatter rounds (the same on every rank)
};

/// load_torch_save, filling `stats` on every rank.
LoadResult load_torch_save_with_stats(StateDict& state_dict, const std::string& path,
                                      const TorchSaveLoadOptions& options, MPI_Comm comm, TorchLoadStats& stats);

}  // namespace h5dcp::detail
