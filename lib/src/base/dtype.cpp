#include "h5dcp/dtype.hpp"

#include <array>
#include <utility>

namespace h5dcp {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeInfo, static_cast<std::size_t>(kLastDType) + 1> kDTypes{{
    {DType::Float64, "float64", 8},
    {DType::Float32, "float32", 4},
    {DType::Float16, "float16", 2},
    {DType::BFloat16, "bfloat16", 2},
    {DType::Int64, "int64", 8},
    {DType::Int32, "int32", 4},
    {DType::Int16, "int16", 2},
    {DType::Int8, "int8", 1},
    {DType::UInt8, "uint8", 1},
    {DType::Bool, "bool", 1},
    {DType::UInt16, "uint16", 2},
    {DType::UInt32, "uint32", 4},
    {DType::UInt64, "uint64", 8},
    {DType::Float8_e4m3fn, "float8_e4m3fn", 1},
    {DType::Float8_e5m2, "float8_e5m2", 1},
    {DType::Float8_e4m3fnuz, "float8_e4m3fnuz", 1},
    {DType::Float8_e5m2fnuz, "float8_e5m2fnuz", 1},
    {DType::Float8_e8m0fnu, "float8_e8m0fnu", 1},
    {DType::Complex32, "complex32", 4},
    {DType::Complex64, "complex64", 8},
    {DType::Complex128, "complex128", 16},
}};

// The table is indexed by the enum's value.
constexpr bool table_in_enum_order() {
  for (std::size_t i = 0; i < kDTypes.size(); ++i)
    if (static_cast<std::size_t>(kDTypes[i].dtype) != i) return false;
  return true;
}
static_assert(table_in_enum_order(), "kDTypes must list the dtypes in the order of the enum");

const DTypeInfo& info(DType dtype) noexcept { return kDTypes[static_cast<std::size_t>(dtype)]; }

}  // namespace

std::size_t dtype_size(DType dtype) noexcept { return info(dtype).size; }

std::string_view dtype_name(DType dtype) noexcept { return info(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (const auto& entry : kDTypes)
    if (entry.name == name) return entry.dtype;
  return std::nullopt;
}

std::string supported_dtype_names() {
  std::string out;
  for (const auto& entry : kDTypes) {
    if (!out.empty()) out += ", ";
    out += entry.name;
  }
  return out;
}

bool is_complex(DType dtype) noexcept {
  return dtype == DType::Complex32 || dtype == DType::Complex64 || dtype == DType::Complex128;
}

}  // namespace h5dcp
