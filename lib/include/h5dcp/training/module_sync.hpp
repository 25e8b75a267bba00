#pragma once
// Collective utilities over a module's tensors (PyTorch's torch.distributed.utils
// _sync_module_states and _verify_param_shape_across_processes), over MPI.
//
// Call-order rule: every function here except plan_broadcast_buckets is
// collective over its communicator: all ranks call it, in the same order,
// with the same src and bucket size. A failure on any rank (a bad tensor,
// an MPI error) becomes the same exception on every rank; no rank hangs.
// Without MPI initialized they work on a single process (broadcasts are
// no-ops). They need only MPI_THREAD_SINGLE, from one thread at a time.
//
// torch::nn::Module is only declared here: include <torch/nn/module.h> (or
// <torch/torch.h>) to call the Module overloads; the rest needs no more than
// ATen's Tensor.

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <mpi.h>

#include <cstddef>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace h5dcp {

/// Tensors with their names, as a module's named_parameters() lists them.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// The default bucket size: DistributedDataParallel's 250 MiB.
inline constexpr std::size_t kDefaultBroadcastBucketBytes = std::size_t{250} << 20;

/// Tensors that travel in one MPI_Bcast: all of one dtype, flattened one
/// after the other into one buffer.
struct BroadcastBucket {
  std::vector<std::size_t> tensors;  ///< positions in the list given, ascending
  std::size_t bytes = 0;             ///< their bytes together
  at::ScalarType dtype = at::ScalarType::Undefined;
};

/// The buckets a broadcast of `tensors` uses: tensors of one dtype are packed
/// in order until the next would make the bucket exceed `bucket_bytes`; a
/// tensor larger than `bucket_bytes` travels alone (so any limit works, 0
/// included: one tensor per bucket). Buckets are ordered by their first
/// tensor. Not collective. Throws UsageError when a tensor is undefined.
std::vector<BroadcastBucket> plan_broadcast_buckets(const std::vector<at::Tensor>& tensors,
                                                    std::size_t bucket_bytes = kDefaultBroadcastBucketBytes);

/// Overwrites every rank's `tensors` with rank `src`'s, in the buckets of
/// plan_broadcast_buckets (returned), each one MPI_Bcast of its flattened
/// bytes (a lone contiguous CPU tensor is broadcast in place; others go
/// through one host buffer, reused for every bucket). Tensors on any device
/// work; autograd does not see the copy (parameters that require grad are
/// fine). Ranks must hold tensors of the same dtypes and shapes, in the same
/// order: this is checked first (one hash per rank), and a mismatch throws
/// the UsageError of verify_param_shapes_across_ranks on every rank before
/// anything is changed. Collective over `comm`.
/// Throws (on every rank): UsageError when ranks pass different `src` or
/// `bucket_bytes`, `src` is not a rank of `comm`, or the tensors differ;
/// CheckpointError (step "sync_module_states:check", ":stage" or
/// ":broadcast") when a rank fails — after a failure in ":broadcast" the
/// tensors of ranks other than `src` may hold a mix of old and new values.
/// Without MPI: a no-op (src must be 0) that returns the buckets.
std::vector<BroadcastBucket> sync_params_and_buffers(const std::vector<at::Tensor>& tensors, std::size_t bucket_bytes,
                                                     int src, MPI_Comm comm = MPI_COMM_WORLD);

struct SyncModuleOptions {
  /// The rank whose values every rank gets.
  int src = 0;
  /// Upper bound of one broadcast's bytes (a larger tensor travels alone).
  std::size_t bucket_bytes = kDefaultBroadcastBucketBytes;
  /// Parameter and buffer names to leave alone (as named_parameters() and
  /// named_buffers() name them: "encoder.layer1.weight").
  std::set<std::string> ignore;
  /// Broadcast the buffers too (running statistics, ...), not only the
  /// parameters.
  bool broadcast_buffers = true;
};

/// What sync_module_states broadcast: the names, in order (parameters, then
/// buffers), and the buckets (positions index `names`).
struct ModuleSyncResult {
  std::vector<std::string> names;
  std::vector<BroadcastBucket> buckets;
};

/// Makes every rank's `module` parameters (and buffers, unless
/// `options.broadcast_buffers` is false) equal to rank `options.src`'s, in
/// place, except those named in `options.ignore`: sync_params_and_buffers on
/// them, with their names in error messages. Collective over `comm`; throws
/// as sync_params_and_buffers.
ModuleSyncResult sync_module_states(const torch::nn::Module& module, const SyncModuleOptions& options = {},
                                    MPI_Comm comm = MPI_COMM_WORLD);

/// Checks that every rank holds the same parameters: the same names, each
/// with the same shape and dtype, in the same order. Collective over `comm`;
/// cheap when they agree (one hash per rank). Throws (on every rank) the same
/// UsageError naming each parameter that differs and the ranks on each side:
///   h5dcp: the parameters differ across ranks (...):
///     'fc.weight': shape [4, 3] float32 on ranks 0, 2-3; shape [4, 2] float32 on rank 1
///     'extra': shape [2] float32 on rank 0; missing on ranks 1-3
/// CheckpointError when a rank fails to describe its tensors (an undefined
/// tensor, a name listed twice).
void verify_param_shapes_across_ranks(const NamedTensors& params, MPI_Comm comm = MPI_COMM_WORLD);
/// The same for a module's named_parameters().
void verify_param_shapes_across_ranks(const torch::nn::Module& module, MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace h5dcp
