#pragma once
// Element types h5dcp stores, independent of LibTorch so that the planner and
// the HDF5 backend do not need torch headers.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace h5dcp {

enum class DType : std::uint8_t {
  Float64,
  Float32,
  Float16,
  BFloat16,
  Int64,
  Int32,
  Int16,
  Int8,
  UInt8,
  Bool,
  // Added with format 1.1 (PyTorch 2.x dtypes); appended so that the values
  // above keep their numbers.
  UInt16,
  UInt32,
  UInt64,
  Float8_e4m3fn,
  Float8_e5m2,
  Float8_e4m3fnuz,
  Float8_e5m2fnuz,
  Float8_e8m0fnu,
  Complex32,
  Complex64,
  Complex128,
};

/// The last DType: every value from Float64 to it is a valid dtype.
inline constexpr DType kLastDType = DType::Complex128;

/// Size of one element in bytes.
std::size_t dtype_size(DType dtype) noexcept;

/// The torch name of a dtype ("float32", "bfloat16", "bool", ...): the value
/// of the `h5dcp.dtype` attribute in the container.
std::string_view dtype_name(DType dtype) noexcept;

/// Inverse of dtype_name; std::nullopt for an unknown name.
std::optional<DType> dtype_from_name(std::string_view name) noexcept;

/// Every dtype name, comma-separated ("float64, float32, ..."), for messages
/// that say what h5dcp can store.
std::string supported_dtype_names();

/// Complex dtypes: stored as a compound of two floats named "r" and "i".
bool is_complex(DType dtype) noexcept;

}  // namespace h5dcp
