#pragma once
// Non-tensor values <-> (encoding, payload): the payload is exactly what the
// value's dataset holds (docs/FORMAT.md, "Non-tensor values").

#include <optional>
#include <string>
#include <utility>

#include "h5dcp/state_dict.hpp"

namespace h5dcp::detail {

struct EncodedValue {
  std::string encoding;
  std::string payload;
};

/// The encoding of a non-tensor leaf; nullopt for tensors and containers.
/// Throws UsageError for a string holding a NUL character (HDF5 strings
/// end at NUL): `fqn` names it.
std::optional<EncodedValue> encode_value(const StateValue& value, const std::string& fqn);

/// The value back; throws FormatError for an unknown encoding or a payload
/// of the wrong size.
StateValue decode_value(const std::string& encoding, const std::string& payload, const std::string& fqn);

}  // namespace h5dcp::detail
