#include "base/key_escape.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "base/utf8.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string hex_byte(char c) {
  char text[5];
  std::snprintf(text, sizeof text, "\\x%02x", static_cast<unsigned>(static_cast<std::uint8_t>(c)));
  return text;
}

bool is_control(char c) { return static_cast<std::uint8_t>(c) < 0x20 || c == 0x7f; }

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
    if (hi < 0 || lo < 0) throw FormatError("h5dcp: malformed escape in HDF5 name '" + printable_key(name) + "'");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string printable_key(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const auto n = utf8_sequence_length(text, i);
    if (n == 0 || is_control(text[i])) {
      out += hex_byte(text[i]);
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

void require_storable_key(std::string_view fqn, std::string_view where) {
  const bool has_nul = fqn.find('\0') != std::string_view::npos;
  if (!has_nul && is_valid_utf8(fqn)) return;
  throw UsageError("h5dcp: the key '" + printable_key(fqn) + "'" + std::string(where) + " " +
                   (has_nul ? "holds a NUL byte" : "is not valid UTF-8") +
                   ": keys must be valid UTF-8 without NUL bytes (as the str keys of torch.save files are), "
                   "or they could not be read back as the same key");
}

std::size_t key_depth(std::string_view fqn) {
  std::size_t depth = 1;
  for (const char c : fqn) depth += c == '/';
  return depth;
}

void require_readable_depth(std::string_view container_fqn, std::string_view where) {
  const auto depth = key_depth(container_fqn);
  if (depth < kMaxContainerDepth) return;
  const auto shown = printable_key(container_fqn.substr(0, std::min<std::size_t>(container_fqn.size(), 80)));
  throw UsageError("h5dcp: the container '" + shown + (container_fqn.size() > 80 ? "...'" : "'") + std::string(where) +
                   " is nested " + std::to_string(depth) + " dicts or lists deep; h5dcp reads " +
                   "checkpoints nested less than " + std::to_string(kMaxContainerDepth) + " deep, so it does not " +
                   "write deeper ones");
}

}  // namespace h5dcp::detail
