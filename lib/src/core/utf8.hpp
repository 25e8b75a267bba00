#pragma once
// UTF-8 validation for text that crosses into formats that require it (HDF5
// UTF-8 strings, Python str in pickles).

#include <cstdint>
#include <string_view>

namespace h5dcp::detail {

/// True when `s` is well-formed UTF-8: no stray continuation bytes, no
/// truncated sequences, no overlong forms, no code points above U+10FFFF.
inline bool is_valid_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<std::uint8_t>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = c;
    if (c >= 0x80) {
      if ((c & 0xe0) == 0xc0) {
        n = 1;
        cp = c & 0x1fu;
      } else if ((c & 0xf0) == 0xe0) {
        n = 2;
        cp = c & 0x0fu;
      } else if ((c & 0xf8) == 0xf0) {
        n = 3;
        cp = c & 0x07u;
      } else {
        return false;
      }
    }
    if (i + n >= s.size() && n > 0) return false;
    for (std::size_t k = 1; k <= n; ++k) {
      const auto cc = static_cast<std::uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3fu);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff))) return false;
    i += n + 1;
  }
  return true;
}

}  // namespace h5dcp::detail
