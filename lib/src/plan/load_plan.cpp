#include "plan/load_plan.hpp"

#include <set>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

LoadPlan create_local_load_plan(std::vector<ReadItem> wanted, const Metadata& metadata) {
  std::set<std::string> missing;
  std::vector<std::string> problems;
  std::set<std::string> reported;
  for (const auto& item : wanted) {
    const auto& fqn = item.index.fqn;
    const auto it = metadata.state_dict_metadata.find(fqn);
    if (it == metadata.state_dict_metadata.end()) {
      missing.insert(fqn);
      continue;
    }
    const auto* saved = std::get_if<TensorStorageMetadata>(&it->second);
    if (saved == nullptr) {
      if (reported.insert(fqn).second) problems.push_back("'" + fqn + "' is not a tensor in the checkpoint");
      continue;
    }
    if (saved->properties.dtype != item.dtype) {
      if (reported.insert(fqn).second)
        problems.push_back("'" + fqn + "' is " + std::string(dtype_name(saved->properties.dtype)) +
                           " in the checkpoint but " + std::string(dtype_name(item.dtype)) + " in the state dict");
      continue;
    }
    if (saved->size != item.global_shape) {
      if (reported.insert(fqn).second)
        problems.push_back("'" + fqn + "' has global shape " + describe_shape(saved->size) +
                           " in the checkpoint but " + describe_shape(item.global_shape) + " in the state dict");
      continue;
    }
    bool inside = item.box.offsets.size() == saved->size.size() && item.box.sizes.size() == saved->size.size();
    for (std::size_t d = 0; inside && d < saved->size.size(); ++d)
      inside = item.box.offsets[d] >= 0 && item.box.sizes[d] >= 0 &&
               item.box.offsets[d] + item.box.sizes[d] <= saved->size[d];
    if (!inside)
      problems.push_back("the block " + describe_box(item.box) + " of '" + fqn + "' lies outside its global shape " +
                         describe_shape(saved->size));
  }
  if (!missing.empty()) {
    std::string keys;
    for (const auto& k : missing) keys += (keys.empty() ? "'" : ", '") + k + "'";
    problems.insert(problems.begin(), "missing from the checkpoint: " + keys);
  }
  if (!problems.empty()) {
    std::string message = "h5dcp: cannot load:";
    for (const auto& p : problems) message += "\n    " + p;
    throw UsageError(message);
  }
  return LoadPlan{std::move(wanted)};
}

}  // namespace h5dcp::detail
