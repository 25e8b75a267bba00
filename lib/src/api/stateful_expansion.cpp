#include "api/stateful_expansion.hpp"

#include <algorithm>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

bool value_has_stateful(const StateValue& value) {
  if (value.is_stateful()) return true;
  if (const auto* dict = std::get_if<StateDict>(&value)) return has_stateful(*dict);
  if (const auto* list = std::get_if<StateList>(&value))
    return std::any_of(list->begin(), list->end(), value_has_stateful);
  return false;
}

std::string child(const std::string& parent, const std::string& key) {
  return parent.empty() ? fqn_of({key}) : parent + "/" + fqn_of({key});
}

// Replaces Statefuls in `value` (at `fqn`) using `expand`, recursively.
template <typename Expand>
StateValue expanded(const StateValue& value, const std::string& fqn, Expand&& expand) {
  if (const auto* object = std::get_if<std::shared_ptr<Stateful>>(&value)) {
    if (!*object) throw UsageError("h5dcp: '" + fqn + "' is a null Stateful");
    StateDict inner = expand(*object, fqn);
    StateDict out;
    for (const auto& [key, v] : inner) out.emplace(key, expanded(v, child(fqn, key), expand));
    return out;
  }
  if (const auto* dict = std::get_if<StateDict>(&value)) {
    StateDict out;
    for (const auto& [key, v] : *dict) out.emplace(key, expanded(v, child(fqn, key), expand));
    return out;
  }
  if (const auto* list = std::get_if<StateList>(&value)) {
    StateList out;
    for (std::size_t i = 0; i < list->size(); ++i)
      out.push_back(expanded((*list)[i], child(fqn, std::to_string(i)), expand));
    return out;
  }
  return value;
}

template <typename Expand>
StateDict expand_dict(const StateDict& state, Expand&& expand) {
  StateDict out;
  for (const auto& [key, value] : state) out.emplace(key, expanded(value, fqn_of({key}), expand));
  return out;
}

// True when `fqn` lies inside (or is) one of the Statefuls' subtrees.
bool under_stateful(const std::string& fqn, const LoadExpansion& expansion) {
  return std::any_of(expansion.objects.begin(), expansion.objects.end(),
                     [&](const auto& o) { return fqn == o.first || fqn.rfind(o.first + "/", 0) == 0; });
}

}  // namespace

bool has_stateful(const StateDict& state) {
  return std::any_of(state.begin(), state.end(), [](const auto& kv) { return value_has_stateful(kv.second); });
}

StateDict expand_for_save(const StateDict& state) {
  return expand_dict(state,
                     [](const std::shared_ptr<Stateful>& object, const std::string&) { return object->state_dict(); });
}

LoadExpansion expand_for_load(const StateDict& state, const Metadata& metadata) {
  LoadExpansion expansion;
  expansion.target = expand_dict(state, [&](const std::shared_ptr<Stateful>& object, const std::string& fqn) {
    expansion.objects.emplace_back(fqn, object);
    return object->state_dict_for_load(metadata, fqn);
  });
  return expansion;
}

void commit_load(LoadExpansion& expansion, StateDict& state) {
  // Values outside the Statefuls go back into the caller's dict (tensors
  // were filled in place already; values were replaced in the copy).
  for (const auto& [fqn, value] : flatten_state_dict(expansion.target).leaves)
    if (!under_stateful(fqn, expansion)) value_at(state, fqn) = value;
  // Innermost first: an object sees its children's state already taken.
  for (auto it = expansion.objects.rbegin(); it != expansion.objects.rend(); ++it)
    it->second->load_state_dict(std::get<StateDict>(value_at(expansion.target, it->first)));
}

}  // namespace h5dcp::detail
