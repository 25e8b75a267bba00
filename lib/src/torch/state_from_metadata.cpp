#include "torch/state_from_metadata.hpp"

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

StateDict state_from_metadata(const Metadata& metadata, const std::string& prefix, const TensorFactory& make_tensor) {
  const std::string start = prefix.empty() ? "" : prefix + "/";
  auto relative = [&](const std::string& fqn) -> std::optional<std::string> {
    if (fqn.size() <= start.size() || fqn.compare(0, start.size(), start) != 0) return std::nullopt;
    return fqn.substr(start.size());
  };
  FlatStateDict flat;
  for (const auto& [fqn, kind] : metadata.containers)
    if (const auto rel = relative(fqn)) flat.containers.emplace(*rel, kind);
  for (const auto& [fqn, storage] : metadata.state_dict_metadata) {
    const auto rel = relative(fqn);
    if (!rel) continue;
    if (const auto* t = std::get_if<TensorStorageMetadata>(&storage))
      flat.leaves.emplace(*rel, make_tensor(*rel, *t));
    else
      flat.leaves.emplace(*rel, StateValue(std::monostate{}));  // replaced by the stored value
  }
  if (!prefix.empty() && flat.leaves.empty() && flat.containers.empty() && metadata.containers.count(prefix) == 0)
    throw UsageError("h5dcp: the checkpoint holds nothing under '" + prefix + "'");
  return unflatten_state_dict(flat);
}

}  // namespace h5dcp::detail
