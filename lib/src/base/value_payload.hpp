#pragma once
// The payload bytes of fixed-size non-tensor values (docs/FORMAT.md,
// "Non-tensor values"): the value's little-endian bytes, as its dataset holds
// them. Shared by the state-dict codec and the torch.save indexer.

#include <cstring>
#include <string>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

template <typename T>
std::string raw_payload(T value) {
  std::string out(sizeof(T), '\0');
  std::memcpy(out.data(), &value, sizeof(T));
  return out;
}

inline std::string bool_payload(bool value) { return std::string(1, value ? '\1' : '\0'); }

/// The value back; throws FormatError naming `fqn` for a payload of the wrong size.
template <typename T>
T from_raw_payload(const std::string& payload, const std::string& fqn) {
  if (payload.size() != sizeof(T)) throw FormatError("h5dcp: value '" + fqn + "' has a payload of the wrong size");
  T value;
  std::memcpy(&value, payload.data(), sizeof(T));
  return value;
}

}  // namespace h5dcp::detail
