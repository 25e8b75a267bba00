#pragma once
// A compact binary encoding for what ranks exchange (plans, metadata, error
// messages): little-endian fixed-width integers and length-prefixed strings.
// No per-item pickling; every rank runs the same build, so there is no
// versioning inside a job.
//
// A message is written and read by put_value / get_value from its type:
// numbers as they are, bools and enums as one byte, strings and lists (any
// range, maps too) with a count first, pairs, optionals and variants, and a
// struct through the list of its fields that H5DCP_MESSAGE_FIELDS names once.
// Reading checks every count against the bytes left and every enum against
// its last enumerator (LastEnumerator), so a corrupt message throws Error.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "h5dcp/dtype.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {

using Bytes = std::string;

/// The fields of a message struct, in wire order: specialized by
/// H5DCP_MESSAGE_FIELDS(Type, m.a, m.b, ...) in namespace h5dcp.
template <typename T>
struct MessageFields {};
#define H5DCP_MESSAGE_FIELDS(Type, ...)                       \
  template <>                                                 \
  struct detail::MessageFields<Type> {                        \
    static auto of(auto& m) { return std::tie(__VA_ARGS__); } \
  }

/// The last enumerator of an enum that messages carry (values above it are corrupt).
template <typename E>
struct LastEnumerator {};
template <>
struct LastEnumerator<DType> {
  static constexpr DType value = kLastDType;
};

template <typename T>
concept MessageStruct = requires(T& m) {
  MessageFields<T>::of(m);
};

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <typename T>
struct IsVariant : std::false_type {};
template <typename... A>
struct IsVariant<std::variant<A...>> : std::true_type {};
template <typename T>
struct IsPair : std::false_type {};
template <typename A, typename B>
struct IsPair<std::pair<A, B>> : std::true_type {};

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
  /// Any message value (the file comment lists what it takes).
  template <typename T>
  void put_value(const T& value) {
    if constexpr (std::is_enum_v<T>) {
      static_assert(static_cast<std::uint64_t>(LastEnumerator<T>::value) <= 0xff, "an enum of one byte");
      put<std::uint8_t>(static_cast<std::uint8_t>(value));
    } else if constexpr (std::is_same_v<T, bool>) {
      put<std::uint8_t>(value ? 1 : 0);
    } else if constexpr (std::is_arithmetic_v<T>) {
      put(value);
    } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
      put_string(value);
    } else if constexpr (MessageStruct<T>) {
      std::apply([&](const auto&... field) { (put_value(field), ...); }, MessageFields<T>::of(value));
    } else if constexpr (IsPair<T>::value) {
      put_value(value.first);
      put_value(value.second);
    } else if constexpr (IsOptional<T>::value) {
      put_value(value.has_value());
      if (value) put_value(*value);
    } else if constexpr (IsVariant<T>::value) {
      put<std::uint8_t>(static_cast<std::uint8_t>(value.index()));
      std::visit([&](const auto& alternative) { put_value(alternative); }, value);
    } else {
      static_assert(
          requires { value.size(), value.begin(); }, "not a message value");
      put<std::uint64_t>(value.size());
      for (const auto& element : value) put_value(element);
    }
  }
  Bytes take() { return std::move(out_); }

 private:
  Bytes out_;
};

/// The fewest bytes a value of type T takes on the wire (a list's or a
/// string's: its count), so that a count of T can be checked before it sizes
/// anything.
template <typename T>
constexpr std::size_t min_wire_size() {
  // bools, enums, an optional's presence and a variant's index: one byte
  if constexpr (std::is_same_v<T, bool> || std::is_enum_v<T> || IsOptional<T>::value || IsVariant<T>::value)
    return 1;
  else if constexpr (std::is_arithmetic_v<T>)
    return sizeof(T);
  else if constexpr (MessageStruct<T>)
    return []<typename... F>(std::tuple<F...>*) {
      return (min_wire_size<std::remove_cvref_t<F>>() + ... + 0);
    }(static_cast<decltype(MessageFields<T>::of(std::declval<T&>()))*>(nullptr));
  else if constexpr (IsPair<T>::value)
    return min_wire_size<typename T::first_type>() + min_wire_size<typename T::second_type>();
  else
    return sizeof(std::uint64_t);
}

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
  /// Any message value, as ByteWriter::put_value wrote it; throws Error on a
  /// corrupt one.
  template <typename T>
  void get_value(T& value) {
    if constexpr (std::is_same_v<T, bool>) {
      value = get<std::uint8_t>() != 0;
    } else if constexpr (std::is_enum_v<T>) {
      const auto raw = get<std::uint8_t>();
      if (raw > static_cast<std::uint8_t>(LastEnumerator<T>::value)) throw Error("h5dcp: corrupt message (enum)");
      value = static_cast<T>(raw);
    } else if constexpr (std::is_arithmetic_v<T>) {
      value = get<T>();
    } else if constexpr (std::is_same_v<T, std::string>) {
      value = get_string();
    } else if constexpr (MessageStruct<T>) {
      std::apply([&](auto&... field) { (get_value(field), ...); }, MessageFields<T>::of(value));
    } else if constexpr (IsPair<T>::value) {
      get_value(value.first);
      get_value(value.second);
    } else if constexpr (IsOptional<T>::value) {
      value.reset();
      if (get_value<bool>()) value = get_value<typename T::value_type>();
    } else if constexpr (IsVariant<T>::value) {
      get_alternative(value, get<std::uint8_t>(), std::make_index_sequence<std::variant_size_v<T>>());
    } else {
      value.clear();
      for (auto n = get_count(min_wire_size<typename T::value_type>()); n > 0; --n) {
        if constexpr (requires { typename T::mapped_type; }) {
          auto key = get_value<typename T::key_type>();
          value.emplace(std::move(key), get_value<typename T::mapped_type>());
        } else {
          value.push_back(get_value<typename T::value_type>());
        }
      }
    }
  }
  template <typename T>
  T get_value() {
    T value{};
    get_value(value);
    return value;
  }
  /// A whole message: throws Error when bytes are left over.
  template <typename T>
  static T decode(std::string_view bytes) {
    ByteReader r(bytes);
    auto value = r.get_value<T>();
    if (!r.done()) throw Error("h5dcp: corrupt message (trailing bytes)");
    return value;
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
  template <typename V, std::size_t... I>
  void get_alternative(V& value, std::size_t index, std::index_sequence<I...>) {
    if (index >= sizeof...(I)) throw Error("h5dcp: corrupt message (variant)");
    (void)((index == I && (value = get_value<std::variant_alternative_t<I, V>>(), true)) || ...);
  }
  const char* take(std::size_t n) {
    if (n > in_.size() - pos_) throw Error("h5dcp: corrupt message (truncated)");
    const char* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }

  std::string_view in_;
  std::size_t pos_ = 0;
};

/// A whole message as ByteWriter::put_value writes it.
template <typename T>
Bytes encode_message(const T& value) {
  ByteWriter w;
  w.put_value(value);
  return w.take();
}

}  // namespace h5dcp::detail
