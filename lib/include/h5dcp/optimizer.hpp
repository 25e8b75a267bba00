#pragma once
// Optimizers as Statefuls, and loading optimizer state laid out like a
// sharded model (PyTorch DCP's load_sharded_optimizer_state_dict).
//
// The state dict of an optimizer keys per-parameter state by the parameter's
// fully qualified name, not by its index, so it survives reordering and
// resharding:
//   {"state": {"<param fqn>": {"step": 12, "exp_avg": T, "exp_avg_sq": T}, ...},
//    "param_groups": [{"params": ["<param fqn>", ...], "lr": 0.001,
//                      "betas": [0.9, 0.999], ...}, ...]}
// Supported: SGD (with momentum), Adam, AdamW, Adagrad, RMSprop. After a
// round trip the next steps are bit-identical to never having stopped.

#include <mpi.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "h5dcp/options.hpp"
#include "h5dcp/sharded_tensor.hpp"
#include "h5dcp/stateful.hpp"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace h5dcp {

/// Parameters by fully qualified name, in the module's order. Not collective.
std::vector<std::pair<std::string, at::Tensor>> named_parameters(torch::nn::Module& module);

class OptimizerState : public Stateful {
 public:
  /// `parameters` names every parameter the optimizer holds (all of them,
  /// in any order); `layouts` names those that are blocks of larger global
  /// tensors (a sharded model, or ZeRO-style shards of replicated
  /// parameters): their state tensors of the parameter's shape are saved as
  /// ShardedTensors of the global shape. Throws UsageError when a parameter
  /// of the optimizer has no name. Not collective.
  OptimizerState(std::shared_ptr<torch::optim::Optimizer> optimizer,
                 std::vector<std::pair<std::string, at::Tensor>> parameters,
                 std::map<std::string, BlockLayout> layouts = {});

  /// The state as documented above; tensors share storage. Not collective.
  StateDict state_dict() override;

  /// What the checkpoint holds for this optimizer's parameters, allocated
  /// from `metadata` (state appears lazily in LibTorch optimizers).
  StateDict state_dict_for_load(const Metadata& metadata, const std::string& fqn) override;

  /// Rebuilds the per-parameter state and the param groups' options. Throws
  /// UsageError for an unknown optimizer type, a group count or parameter
  /// list that does not match, or a state tensor of the wrong shape.
  void load_state_dict(const StateDict& state) override;

 private:
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<std::pair<std::string, at::Tensor>> parameters_;
  std::map<std::string, BlockLayout> layouts_;
};

/// Loads the optimizer state saved under `optimizer_key` laid out like the
/// model's sharding on the current ranks (PyTorch DCP's
/// load_sharded_optimizer_state_dict). `model_state_dict` maps parameter
/// fqns to the model's tensors as this rank holds them:
/// - a plain tensor (a replicated parameter): each state tensor of the
///   parameter's shape is split along dim 0 across `comm` like torch.chunk
///   (ZeRO-1 style); returned as a ShardedTensor in global coordinates;
/// - a ShardedTensor with one local shard (a tensor-parallel block of the
///   parameter): the state is that block, split along dim 0 across
///   `dp_comm` (the data-parallel group; MPI_COMM_NULL: not split), and
///   returned in the block's own coordinates (global shape = the block's
///   shape, offsets relative to it): the 2-D TP x DP offset translation.
/// Values (steps, param groups) are returned as saved. Collective over `comm`.
/// Throws CheckpointError like load().
StateDict load_sharded_optimizer_state_dict(const StateDict& model_state_dict, const std::string& optimizer_key,
                                            const std::string& path, MPI_Comm dp_comm = MPI_COMM_NULL,
                                            const LoadOptions& options = {}, MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace h5dcp
