#pragma once
// The state dict h5dcp saves and loads: nested dicts and lists, to any depth,
// of tensors, sharded tensors and non-tensor values.
//
// - A plain at::Tensor is replicated: every rank holding the key holds the
//   same values; it is written once.
// - A ShardedTensor is split across ranks (h5dcp/sharded_tensor.hpp).
// - Non-tensor values (None, int, double, bool, string, raw bytes, objects
//   pickled with LibTorch's pickler) are stored as small datasets; ranks
//   holding the same key must hold the same value.
//
// Every leaf has a fully qualified name (fqn): the path of dict keys and list
// positions, each escaped (docs/FORMAT.md) and joined by '/':
//   {"model": {"layer1.weight": w}}  ->  "model/layer1.weight"
//   {"optim": {"groups": [{"lr": 0.1}]}}  ->  "optim/groups/0/lr"
// The fqn is also the value's path in the HDF5 file.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "h5dcp/metadata.hpp"
#include "h5dcp/sharded_tensor.hpp"

namespace h5dcp {

/// Raw bytes, as opposed to text (std::string): stored as a uint8 dataset.
struct ByteString {
  std::string data;
  friend bool operator==(const ByteString& a, const ByteString& b) { return a.data == b.data; }
};

/// An object serialized with LibTorch's pickler (h5dcp/pickle.hpp makes and
/// reads them); stored as a uint8 dataset that Python's torch.load reads.
struct PickledObject {
  std::string data;
  friend bool operator==(const PickledObject& a, const PickledObject& b) { return a.data == b.data; }
};

class Stateful;  // h5dcp/stateful.hpp

struct StateValue;
/// Keys are sorted, so every rank walks them in the same order.
using StateDict = std::map<std::string, StateValue>;
using StateList = std::vector<StateValue>;

/// None (std::monostate), a tensor, a sharded tensor, a non-tensor value, a
/// nested dict or list, or a Stateful object (a module, an optimizer,
/// anything with state_dict()/load_state_dict(): save and load call them).
using StateVariant = std::variant<std::monostate, at::Tensor, ShardedTensor, std::int64_t, double, bool, std::string,
                                  ByteString, PickledObject, StateDict, StateList, std::shared_ptr<Stateful>>;

struct StateValue : StateVariant {
  using StateVariant::StateVariant;
  using StateVariant::operator=;
  StateValue() = default;
  /// Text: a string literal is a std::string, never a bool.
  StateValue(const char* text) : StateVariant(std::string(text)) {}  // NOLINT(google-explicit-constructor)
  /// Any integer is stored as int64.
  StateValue(int value) : StateVariant(static_cast<std::int64_t>(value)) {}  // NOLINT(google-explicit-constructor)

  bool is_tensor() const noexcept { return std::holds_alternative<at::Tensor>(*this); }
  bool is_sharded() const noexcept { return std::holds_alternative<ShardedTensor>(*this); }
  bool is_dict() const noexcept { return std::holds_alternative<StateDict>(*this); }
  bool is_list() const noexcept { return std::holds_alternative<StateList>(*this); }
  bool is_stateful() const noexcept { return std::holds_alternative<std::shared_ptr<Stateful>>(*this); }
};

/// A state dict flattened to its leaves: fqn -> tensor, sharded tensor or
/// non-tensor value; and fqn -> kind of every nested container (not the root).
struct FlatStateDict {
  std::map<std::string, StateValue> leaves;
  std::map<std::string, ContainerKind> containers;
};

/// The fqn of a path of keys and list positions (each escaped, '/'-joined).
std::string fqn_of(const std::vector<std::string>& path);
/// The path of an fqn; throws FormatError on a malformed escape.
std::vector<std::string> path_of(std::string_view fqn);

/// Flattens nested dicts and lists. Tensors are shared, not copied. Not
/// collective.
FlatStateDict flatten_state_dict(const StateDict& state_dict);

/// Rebuilds the nested state dict; a list is rebuilt from children "0".."n-1"
/// (throws UsageError when one is missing). Not collective.
StateDict unflatten_state_dict(const FlatStateDict& flat);

/// The value at `fqn` in a nested state dict; throws UsageError naming the
/// fqn when there is none. Not collective.
const StateValue& value_at(const StateDict& state_dict, std::string_view fqn);
StateValue& value_at(StateDict& state_dict, std::string_view fqn);

/// The tensor that `index` names inside `value`: the value itself for a plain
/// tensor, or the local shard starting at `index.offset` for a sharded one
/// (`index.index` is tried first). Throws UsageError when there is no such
/// tensor or shard. Not collective.
at::Tensor find_tensor_shard(const StateValue& value, const MetadataIndex& index);

/// find_tensor_shard on the value at `index.fqn` (a nested path); throws
/// UsageError naming the fqn when the state dict has none. Not collective.
at::Tensor find_state_dict_object(const StateDict& state_dict, const MetadataIndex& index);

}  // namespace h5dcp
