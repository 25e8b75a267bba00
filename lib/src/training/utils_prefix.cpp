// replace_by_prefix / replace_fqn_prefix: renaming keys that start with a
// prefix, all or nothing.

#include <map>
#include <string>
#include <utility>

#include "h5dcp/error.hpp"
#include "h5dcp/training/utils.hpp"

namespace h5dcp {
namespace {

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

void check_distinct(std::string_view old_prefix, std::string_view new_prefix) {
  if (old_prefix == new_prefix)
    throw UsageError("h5dcp: replace_by_prefix needs two different prefixes (both are '" + std::string(old_prefix) +
                     "')");
}

std::string renamed(const std::string& key, std::string_view old_prefix, std::string_view new_prefix) {
  return starts_with(key, old_prefix) ? std::string(new_prefix) + key.substr(old_prefix.size()) : key;
}

// Two keys would end up with one name: `moved` renamed onto `replaced`.
[[noreturn]] void refuse_collision(const char* what, const std::string& moved, const std::string& name,
                                   std::string_view old_prefix, std::string_view new_prefix,
                                   const std::string& replaced) {
  throw UsageError("h5dcp: renaming " + std::string(what) + " '" + moved + "' to '" + name + "' (prefix '" +
                   std::string(old_prefix) + "' -> '" + std::string(new_prefix) + "') would replace '" + replaced +
                   "'");
}

[[noreturn]] void refuse_merge(const std::string& fqn, const std::string& name) {
  throw UsageError("h5dcp: renaming '" + fqn + "' to '" + name + "' would merge a list and a dict");
}

// The new name of each key, in order; throws before anything changes when two
// keys would end up with one name. (Renamed keys cannot collide with each
// other: they keep distinct rests after one prefix.)
template <typename Keys>
std::vector<std::string> new_keys(const Keys& keys, std::string_view old_prefix, std::string_view new_prefix,
                                  const char* what) {
  check_distinct(old_prefix, new_prefix);
  std::vector<std::string> result;
  std::map<std::string, std::string> taken;  // new key -> old key
  for (const auto& key : keys) {
    auto name = renamed(key, old_prefix, new_prefix);
    const auto [it, fresh] = taken.emplace(name, key);
    if (!fresh) {
      const auto& other = it->second;
      const auto& moved = other == name ? key : other;  // the one renamed onto the other
      refuse_collision(what, moved, name, old_prefix, new_prefix, moved == key ? other : key);
    }
    result.push_back(std::move(name));
  }
  return result;
}

template <typename Map>
void rename_map(Map& map, std::string_view old_prefix, std::string_view new_prefix) {
  std::vector<std::string> keys;
  keys.reserve(map.size());
  for (const auto& entry : map) keys.push_back(entry.first);
  const auto names = new_keys(keys, old_prefix, new_prefix, "the key");
  // Copies (tensors are shared, not copied): `map` stays whole until the
  // new one is complete.
  Map out;
  std::size_t i = 0;
  for (const auto& entry : map) out.emplace(names[i++], entry.second);
  map = std::move(out);
}

}  // namespace

void replace_by_prefix(StateDict& state_dict, std::string_view old_prefix, std::string_view new_prefix) {
  rename_map(state_dict, old_prefix, new_prefix);
}

void replace_by_prefix(std::map<std::string, at::Tensor>& tensors, std::string_view old_prefix,
                       std::string_view new_prefix) {
  rename_map(tensors, old_prefix, new_prefix);
}

void replace_by_prefix(torch::OrderedDict<std::string, at::Tensor>& tensors, std::string_view old_prefix,
                       std::string_view new_prefix) {
  std::vector<std::string> keys;
  for (const auto& item : tensors) keys.push_back(item.key());
  const auto names = new_keys(keys, old_prefix, new_prefix, "the key");
  torch::OrderedDict<std::string, at::Tensor> out(tensors.key_description());
  out.reserve(tensors.size());
  std::size_t i = 0;
  for (const auto& item : tensors) out.insert(names[i++], item.value());
  tensors = std::move(out);
}

void replace_fqn_prefix(StateDict& state_dict, std::string_view old_prefix, std::string_view new_prefix) {
  check_distinct(old_prefix, new_prefix);
  const auto flat = flatten_state_dict(state_dict);

  FlatStateDict out;
  {
    std::vector<std::string> leaves;
    for (const auto& [fqn, value] : flat.leaves) leaves.push_back(fqn);
    const auto names = new_keys(leaves, old_prefix, new_prefix, "the leaf");
    std::size_t i = 0;
    for (const auto& [fqn, value] : flat.leaves) out.leaves.emplace(names[i++], value);
  }
  // Containers: a renamed one merges with one of the same kind already
  // there (another kind is an error). The result holds the ancestors of every
  // leaf, and the containers that were empty in the input; a container whose
  // content all moved away disappears; missing parents become dicts.
  std::map<std::string, ContainerKind> kinds;
  std::vector<std::string> kept_empty;
  for (const auto& [fqn, kind] : flat.containers) {
    const auto name = renamed(fqn, old_prefix, new_prefix);
    const auto [it, fresh] = kinds.emplace(name, kind);
    if (!fresh && it->second != kind) refuse_merge(fqn, name);
    const auto child = fqn + "/";
    const auto leaf = flat.leaves.lower_bound(child);
    const auto sub = flat.containers.lower_bound(child);
    if (!(leaf != flat.leaves.end() && starts_with(leaf->first, child)) &&
        !(sub != flat.containers.end() && starts_with(sub->first, child)))
      kept_empty.push_back(name);
  }
  const auto add_container = [&](const std::string& name) {
    const auto kind = kinds.find(name);
    out.containers.emplace(name, kind == kinds.end() ? ContainerKind::Dict : kind->second);
  };
  const auto add_ancestors = [&](const std::string& fqn) {
    for (auto slash = fqn.find('/'); slash != std::string::npos; slash = fqn.find('/', slash + 1))
      add_container(fqn.substr(0, slash));
  };
  for (const auto& [fqn, value] : out.leaves) add_ancestors(fqn);
  for (const auto& name : kept_empty) {
    add_ancestors(name);
    add_container(name);
  }
  for (const auto& [fqn, value] : out.leaves)
    if (out.containers.count(fqn) != 0)
      throw UsageError("h5dcp: renaming by prefix '" + std::string(old_prefix) + "' -> '" + std::string(new_prefix) +
                       "' puts both a value and a container at '" + fqn + "'");

  try {
    state_dict = unflatten_state_dict(out);  // throws UsageError on a list with a gap
  } catch (const FormatError& e) {           // a prefix with a malformed escape
    throw UsageError(std::string("h5dcp: replace_fqn_prefix: ") + e.what());
  }
}

}  // namespace h5dcp
