// Nested state dicts: fqns, flattening, and lookups by fqn.

#include <ATen/core/Tensor.h>

#include "base/key_escape.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {
namespace {

std::string child_fqn(const std::string& parent, const std::string& key) {
  const auto name = detail::escape_link_name(key);
  return parent.empty() ? name : parent + "/" + name;
}

void flatten_into(const StateValue& value, const std::string& fqn, FlatStateDict& flat) {
  if (const auto* dict = std::get_if<StateDict>(&value)) {
    flat.containers.emplace(fqn, ContainerKind::Dict);
    for (const auto& [key, child] : *dict) flatten_into(child, child_fqn(fqn, key), flat);
  } else if (const auto* list = std::get_if<StateList>(&value)) {
    flat.containers.emplace(fqn, ContainerKind::List);
    for (std::size_t i = 0; i < list->size(); ++i) flatten_into((*list)[i], child_fqn(fqn, std::to_string(i)), flat);
  } else {
    flat.leaves.emplace(fqn, value);
  }
}

// Walks `path` down from the root; nullptr where it leads nowhere.
template <typename Dict, typename Value>
Value* walk(Dict& root, std::string_view fqn) {
  Value* current = nullptr;
  for (const auto& key : path_of(fqn)) {
    if (current == nullptr) {
      const auto it = root.find(key);
      if (it == root.end()) return nullptr;
      current = &it->second;
    } else if (auto* dict = std::get_if<StateDict>(current)) {
      const auto it = dict->find(key);
      if (it == dict->end()) return nullptr;
      current = &it->second;
    } else if (auto* list = std::get_if<StateList>(current)) {
      std::size_t pos = 0;
      try {
        pos = std::stoul(key);
      } catch (const std::exception&) {
        return nullptr;
      }
      if (pos >= list->size() || std::to_string(pos) != key) return nullptr;
      current = &(*list)[pos];
    } else {
      return nullptr;
    }
  }
  return current;
}

}  // namespace

std::string fqn_of(const std::vector<std::string>& path) {
  std::string fqn;
  for (const auto& key : path) fqn = child_fqn(fqn, key);
  return fqn;
}

std::vector<std::string> path_of(std::string_view fqn) {
  std::vector<std::string> path;
  std::size_t start = 0;
  while (true) {
    const auto slash = fqn.find('/', start);
    path.push_back(detail::unescape_link_name(fqn.substr(start, slash - start)));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return path;
}

FlatStateDict flatten_state_dict(const StateDict& state_dict) {
  FlatStateDict flat;
  for (const auto& [key, value] : state_dict) flatten_into(value, child_fqn("", key), flat);
  return flat;
}

StateDict unflatten_state_dict(const FlatStateDict& flat) {
  // Containers first (parents sort before children), then the leaves.
  StateDict root;
  auto place = [&](const std::string& fqn, StateValue value) {
    const auto slash = fqn.rfind('/');
    const auto key = detail::unescape_link_name(slash == std::string::npos ? fqn : fqn.substr(slash + 1));
    if (slash == std::string::npos) {
      root[key] = std::move(value);
      return;
    }
    StateValue* parent = walk<StateDict, StateValue>(root, fqn.substr(0, slash));
    if (parent == nullptr) throw UsageError("h5dcp: '" + fqn + "' has no container '" + fqn.substr(0, slash) + "'");
    if (auto* dict = std::get_if<StateDict>(parent)) {
      (*dict)[key] = std::move(value);
    } else if (auto* list = std::get_if<StateList>(parent)) {
      std::size_t pos = 0;
      try {
        pos = std::stoul(key);
      } catch (const std::exception&) {
        throw UsageError("h5dcp: '" + fqn + "' is in a list but '" + key + "' is not a position");
      }
      if (list->size() <= pos) list->resize(pos + 1, StateValue(std::monostate{}));
      (*list)[pos] = std::move(value);
    } else {
      throw UsageError("h5dcp: '" + fqn.substr(0, slash) + "' holds '" + fqn + "' but is not a container");
    }
  };
  for (const auto& [fqn, kind] : flat.containers) {
    place(fqn, kind == ContainerKind::Dict ? StateValue(StateDict{}) : StateValue(StateList{}));
  }
  for (const auto& [fqn, value] : flat.leaves) place(fqn, value);
  for (const auto& [fqn, kind] : flat.containers) {
    if (kind != ContainerKind::List) continue;
    const auto& list = std::get<StateList>(*walk<StateDict, StateValue>(root, fqn));
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto child = fqn + "/" + std::to_string(i);
      if (flat.leaves.count(child) == 0 && flat.containers.count(child) == 0)
        throw UsageError("h5dcp: the list '" + fqn + "' has no element " + std::to_string(i));
    }
  }
  return root;
}

const StateValue& value_at(const StateDict& state_dict, std::string_view fqn) {
  const auto* value = walk<const StateDict, const StateValue>(state_dict, fqn);
  if (value == nullptr) throw UsageError("h5dcp: the state dict has no key '" + std::string(fqn) + "'");
  return *value;
}

StateValue& value_at(StateDict& state_dict, std::string_view fqn) {
  auto* value = walk<StateDict, StateValue>(state_dict, fqn);
  if (value == nullptr) throw UsageError("h5dcp: the state dict has no key '" + std::string(fqn) + "'");
  return *value;
}

at::Tensor find_tensor_shard(const StateValue& value, const MetadataIndex& index) {
  if (const auto* tensor = std::get_if<at::Tensor>(&value)) return *tensor;
  const auto* sharded = std::get_if<ShardedTensor>(&value);
  if (sharded == nullptr) throw UsageError("h5dcp: '" + index.fqn + "' is not a tensor in the state dict");
  const auto& shards = sharded->local_shards();
  if (!index.offset)
    throw UsageError("h5dcp: '" + index.fqn + "' is sharded; looking up one of its shards needs offsets");
  if (index.index && *index.index < shards.size() && shards[*index.index].offsets == *index.offset)
    return shards[*index.index].tensor;
  for (const auto& shard : shards)
    if (shard.offsets == *index.offset) return shard.tensor;
  std::string at;
  for (auto o : *index.offset) at += (at.empty() ? "" : ", ") + std::to_string(o);
  throw UsageError("h5dcp: no local shard of '" + index.fqn + "' starts at [" + at + "]");
}

at::Tensor find_state_dict_object(const StateDict& state_dict, const MetadataIndex& index) {
  return find_tensor_shard(value_at(state_dict, index.fqn), index);
}

}  // namespace h5dcp
