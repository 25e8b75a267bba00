#pragma once
// What the Module overloads of h5dcp/training/module_sync.hpp share with the tensor
// versions: checks and broadcasts of named tensors.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "comm/comm.hpp"
#include "h5dcp/training/module_sync.hpp"

namespace h5dcp::detail {

/// Collective over `comm`: returns when every rank holds tensors of the same
/// names, dtypes and shapes in the same order. Throws, on every rank,
/// CheckpointError(`step`) when a rank cannot describe its tensors (undefined,
/// a name twice, or — with `dense_only` — not a dense tensor with memory),
/// and the same UsageError naming each difference (`what` names the tensors)
/// when ranks differ.
void require_same_tensors(const Comm& comm, const NamedTensors& tensors, std::string_view what, const std::string& step,
                          bool dense_only);

/// sync_params_and_buffers with names for the messages.
std::vector<BroadcastBucket> broadcast_named(const NamedTensors& tensors, std::size_t bucket_bytes, int src,
                                             MPI_Comm comm);

}  // namespace h5dcp::detail
