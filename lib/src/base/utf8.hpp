#pragma once
// UTF-8 validation for text that crosses into formats that require it (HDF5
// UTF-8 strings, Python str in pickles).

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace h5dcp::detail {

/// The length (1-4) of the well-formed UTF-8 sequence that starts at byte
/// `i` of `s`, or 0 when none does: a stray continuation byte, a truncated
/// sequence, an overlong form, a UTF-16 surrogate (U+D800-U+DFFF: what
/// Python's "surrogatepass" writes for a lone surrogate; strict decoders such
/// as h5py's refuse it), or a code point above U+10FFFF.
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) noexcept {
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
      return 0;
    }
  }
  if (i + n >= s.size() && n > 0) return 0;
  for (std::size_t k = 1; k <= n; ++k) {
    const auto cc = static_cast<std::uint8_t>(s[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3fu);
  }
  if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
  if (n == 2 && cp >= 0xd800 && cp <= 0xdfff) return 0;
  return n + 1;
}

/// True when `s` is well-formed UTF-8 (every byte in a sequence that
/// utf8_sequence_length accepts).
inline bool is_valid_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const auto n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace h5dcp::detail
