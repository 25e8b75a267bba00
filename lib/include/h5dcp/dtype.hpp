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
};

/// Size of one element in bytes.
std::size_t dtype_size(DType dtype) noexcept;

/// The torch name of a dtype ("float32", "bfloat16", "bool", ...): the value
/// of the `h5dcp.dtype` attribute in the container.
std::string_view dtype_name(DType dtype) noexcept;

/// Inverse of dtype_name; std::nullopt for an unknown name.
std::optional<DType> dtype_from_name(std::string_view name) noexcept;

}  // namespace h5dcp
