#include "torch/value_codec.hpp"

#include <cstring>

#include "base/value_payload.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
std::optional<EncodedValue> encode_value(const StateValue& value, const std::string& fqn) {
  if (std::holds_alternative<std::monostate>(value)) return EncodedValue{"none", {}};
  if (const auto* v = std::get_if<std::int64_t>(&value)) return EncodedValue{"int", raw_payload(*v)};
  if (const auto* v = std::get_if<double>(&value)) return EncodedValue{"float", raw_payload(*v)};
  if (const auto* v = std::get_if<bool>(&value)) return EncodedValue{"bool", bool_payload(*v)};
  if (const auto* v = std::get_if<std::string>(&value)) {
    if (v->find('\0') != std::string::npos)
      throw UsageError("h5dcp: the string '" + fqn + "' holds a NUL character; store it as h5dcp::ByteString");
    return EncodedValue{"str", *v};
  }
  if (const auto* v = std::get_if<ByteString>(&value)) return EncodedValue{"bytes", v->data};
  if (const auto* v = std::get_if<PickledObject>(&value)) return EncodedValue{"pickle", v->data};
  return std::nullopt;
}

StateValue decode_value(const std::string& encoding, const std::string& payload, const std::string& fqn) {
  if (encoding == "none") return StateValue(std::monostate{});
  if (encoding == "int") return StateValue(from_raw_payload<std::int64_t>(payload, fqn));
  if (encoding == "float") return StateValue(from_raw_payload<double>(payload, fqn));
  if (encoding == "bool") return StateValue(from_raw_payload<std::uint8_t>(payload, fqn) != 0);
  if (encoding == "str") return StateValue(payload);
  if (encoding == "bytes") return StateValue(ByteString{payload});
  if (encoding == "pickle") return StateValue(PickledObject{payload});
  throw FormatError("h5dcp: value '" + fqn + "' has an unknown encoding '" + encoding + "'");
}

}  // namespace h5dcp::detail
