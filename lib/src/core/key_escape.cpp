#include "core/key_escape.hpp"

#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string escape_link_name(std::string_view key) {
  if (key.empty()) return "%";
  if (key == ".") return "%2E";
  std::string out;
  out.reserve(key.size());
  for (char c : key) {
    if (c == '%')
      out += "%25";
    else if (c == '/')
      out += "%2F";
    else
      out += c;
  }
  return out;
}

std::string unescape_link_name(std::string_view name) {
  if (name == "%") return "";
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (name[i] != '%') {
      out += name[i];
      continue;
    }
    const bool complete = i + 2 < name.size();
    const int hi = complete ? hex_value(name[i + 1]) : -1;
    const int lo = complete ? hex_value(name[i + 2]) : -1;
    if (hi < 0 || lo < 0) throw FormatError("h5dcp: malformed escape in HDF5 name '" + std::string(name) + "'");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

}  // namespace h5dcp::detail
