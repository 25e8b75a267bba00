#pragma once
// Stateful objects: anything with state_dict() / load_state_dict() (PyTorch
// DCP's Stateful protocol). Put one in a state dict as
// std::shared_ptr<Stateful>: save() saves its state_dict() in its place;
// load() loads into its state dict for loading and then hands the result to
// its load_state_dict(). Adapters for torch::nn::Module and
// torch::optim::Optimizer are in h5dcp/module.hpp and h5dcp/optimizer.hpp.

#include <string>

#include "h5dcp/metadata.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {

class Stateful {
 public:
  virtual ~Stateful() = default;

  /// The state to save. Tensors should share storage with the object's own
  /// (no copies), so a load fills them in place.
  virtual StateDict state_dict() = 0;

  /// The state dict a load fills; by default state_dict(). Objects whose
  /// state appears lazily (an optimizer before its first step) allocate what
  /// the checkpoint holds under `fqn` (this object's place in the state dict)
  /// from `metadata`.
  virtual StateDict state_dict_for_load(const Metadata& metadata, const std::string& fqn) {
    (void)metadata;
    (void)fqn;
    return state_dict();
  }

  /// Takes the loaded state (the dict state_dict_for_load returned, filled).
  /// Throws UsageError when it does not fit the object.
  virtual void load_state_dict(const StateDict& state) = 0;
};

}  // namespace h5dcp
