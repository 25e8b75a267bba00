#pragma once
// State dicts allocated from a checkpoint's metadata: what load_all and the
// optimizer loaders fill.

#include <functional>
#include <string>

#include "h5dcp/metadata.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp::detail {

/// Makes the value to load a stored tensor into (`fqn` relative to the
/// subtree).
using TensorFactory = std::function<StateValue(const std::string& fqn, const TensorStorageMetadata& storage)>;

/// The nested state dict of everything under `prefix` ("" for the whole
/// checkpoint; fqns inside are relative to it): containers as stored,
/// tensors from `make_tensor`, values as placeholders (None) that a load
/// replaces. Throws UsageError when `prefix` holds nothing.
StateDict state_from_metadata(const Metadata& metadata, const std::string& prefix, const TensorFactory& make_tensor);

}  // namespace h5dcp::detail
