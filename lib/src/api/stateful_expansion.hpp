#pragma once
// Stateful objects inside a state dict: replaced by their state dicts before
// a save or a load, and handed the loaded state after a load (PyTorch DCP's
// _stateful_to_state_dict, and the load side of it).

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "h5dcp/stateful.hpp"

namespace h5dcp::detail {

/// True when a Stateful appears anywhere in `state`.
bool has_stateful(const StateDict& state);

/// A copy of `state` in which every Stateful is replaced by its state_dict()
/// (recursively). Tensors are shared, not copied.
StateDict expand_for_save(const StateDict& state);

/// A state dict to load into, and the Statefuls it came from.
struct LoadExpansion {
  StateDict target;
  std::vector<std::pair<std::string, std::shared_ptr<Stateful>>> objects;  ///< fqn, object; parents first
};

/// Replaces every Stateful by its state_dict_for_load(metadata, fqn).
LoadExpansion expand_for_load(const StateDict& state, const Metadata& metadata);

/// After the load: copies loaded values back into `state` outside the
/// Statefuls, then calls each object's load_state_dict with its loaded
/// state, innermost first.
void commit_load(LoadExpansion& expansion, StateDict& state);

}  // namespace h5dcp::detail
