#include "h5dcp/metadata.hpp"

#include "h5dcp/error.hpp"

namespace h5dcp {

const TensorStorageMetadata& find_tensor_metadata(const Metadata& metadata, const std::string& fqn) {
  const auto it = metadata.state_dict_metadata.find(fqn);
  if (it == metadata.state_dict_metadata.end()) throw UsageError("h5dcp: the checkpoint has no key '" + fqn + "'");
  const auto* tensor = std::get_if<TensorStorageMetadata>(&it->second);
  if (tensor == nullptr) throw UsageError("h5dcp: '" + fqn + "' in the checkpoint is not a tensor");
  return *tensor;
}

}  // namespace h5dcp
