#include "interop/torch_save/tree.hpp"

#include "base/key_escape.hpp"
#include "base/utf8.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

std::string child(const std::string& parent, const std::string& key) {
  const auto name = escape_link_name(key);
  return parent.empty() ? name : parent + "/" + name;
}

// A torch.save file's keys and strings are Python str: UTF-8 in the pickle.
// Checked here, where the key is known (the pickle writer only refuses).
void require_utf8(const std::string& text, const std::string& fqn, const char* what) {
  if (is_valid_utf8(text)) return;
  throw UsageError("h5dcp: " + std::string(what) + " '" + printable_key(fqn) +
                   "' is not valid UTF-8, so it cannot be a Python str in a torch.save file");
}

pickle::ObjectPtr dict_object(const StateDict& dict, const std::string& fqn, const TensorObjectFn& tensor);

pickle::ObjectPtr object_of(const StateValue& value, const std::string& fqn, const TensorObjectFn& tensor) {
  using pickle::Object;
  if (std::holds_alternative<std::monostate>(value)) return Object::none();
  if (const auto* v = std::get_if<at::Tensor>(&value)) return tensor(fqn, *v);
  if (const auto* v = std::get_if<std::int64_t>(&value)) return Object::int_of(*v);
  if (const auto* v = std::get_if<double>(&value)) return Object::float_of(*v);
  if (const auto* v = std::get_if<bool>(&value)) return Object::boolean_of(*v);
  if (const auto* v = std::get_if<std::string>(&value)) {
    require_utf8(*v, fqn, "the string value of");
    return Object::str_of(*v);
  }
  if (const auto* v = std::get_if<ByteString>(&value)) return Object::bytes_of(v->data);
  if (const auto* v = std::get_if<PickledObject>(&value)) return Object::bytes_of(v->data);
  if (const auto* v = std::get_if<StateDict>(&value)) return dict_object(*v, fqn, tensor);
  if (const auto* v = std::get_if<StateList>(&value)) {
    auto list = Object::of(pickle::Kind::List);
    for (std::size_t i = 0; i < v->size(); ++i)
      list->items.push_back(object_of((*v)[i], child(fqn, std::to_string(i)), tensor));
    return list;
  }
  if (std::holds_alternative<ShardedTensor>(value))
    throw UsageError("h5dcp: '" + fqn +
                     "' is a ShardedTensor; a torch.save file holds whole tensors: gather it "
                     "first, or save a checkpoint and convert it with checkpoint_to_torch_save");
  throw UsageError("h5dcp: '" + fqn +
                   "' cannot be written to a torch.save file (pass a Stateful object's "
                   "state_dict() instead)");
}

pickle::ObjectPtr dict_object(const StateDict& dict, const std::string& fqn, const TensorObjectFn& tensor) {
  auto out = pickle::Object::of(pickle::Kind::Dict);
  for (const auto& [key, value] : dict) {
    const auto key_fqn = child(fqn, key);
    require_utf8(key, key_fqn, "the key");
    out->entries.emplace_back(pickle::Object::str_of(key), object_of(value, key_fqn, tensor));
  }
  return out;
}

}  // namespace

pickle::ObjectPtr pickle_tree(const StateDict& state_dict, const TensorObjectFn& tensor) {
  return dict_object(state_dict, "", tensor);
}

pickle::ObjectPtr pickle_value(const StateValue& value, const std::string& fqn, const TensorObjectFn& tensor) {
  return object_of(value, fqn, tensor);
}

}  // namespace h5dcp::detail
