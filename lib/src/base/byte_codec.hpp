#pragma once
// A compact binary encoding for what ranks exchange (plans, metadata, error
// messages): little-endian fixed-width integers and length-prefixed strings.
// No per-item pickling; every rank runs the same build, so there is no
// versioning inside a job.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

using Bytes = std::string;

class ByteWriter {
 public:
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T> || std::is_enum_v<T>>>
  void put(T value) {
    const auto* p = reinterpret_cast<const char*>(&value);
    out_.append(p, sizeof(T));
  }
  void put_string(std::string_view s) {
    put<std::uint64_t>(s.size());
    out_.append(s.data(), s.size());
  }
  void put_ints(const std::vector<std::int64_t>& v) {
    put<std::uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(std::int64_t));
  }
  Bytes take() { return std::move(out_); }

 private:
  Bytes out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}

  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T> || std::is_enum_v<T>>>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  std::string get_string() {
    const auto n = get_count(1);
    return std::string(take(n), n);
  }
  std::vector<std::int64_t> get_ints() {
    const auto n = get_count(sizeof(std::int64_t));
    std::vector<std::int64_t> v(n);
    if (n != 0) std::memcpy(v.data(), take(n * sizeof(std::int64_t)), n * sizeof(std::int64_t));
    return v;
  }
  bool done() const noexcept { return pos_ == in_.size(); }
  /// A count of elements of at least `element_size` bytes each that follow
  /// (by default a string's length or a count, which every list element of
  /// the messages begins with); throws when fewer bytes are left, so a
  /// corrupt count never sizes an allocation or a loop. Every decoder reads
  /// its lists' counts here.
  std::size_t get_count(std::size_t element_size = sizeof(std::uint64_t)) {
    const auto n = get<std::uint64_t>();
    if (n > (in_.size() - pos_) / element_size) throw Error("h5dcp: corrupt message (count out of range)");
    return static_cast<std::size_t>(n);
  }

 private:
  const char* take(std::size_t n) {
    if (n > in_.size() - pos_) throw Error("h5dcp: corrupt message (truncated)");
    const char* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }

  std::string_view in_;
  std::size_t pos_ = 0;
};

}  // namespace h5dcp::detail
