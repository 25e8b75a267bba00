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

constexpr std::array<DTypeInfo, 10> kDTypes{{
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
}};

const DTypeInfo& info(DType dtype) noexcept { return kDTypes[static_cast<std::size_t>(dtype)]; }

}  // namespace

std::size_t dtype_size(DType dtype) noexcept { return info(dtype).size; }

std::string_view dtype_name(DType dtype) noexcept { return info(dtype).name; }

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (const auto& entry : kDTypes)
    if (entry.name == name) return entry.dtype;
  return std::nullopt;
}

}  // namespace h5dcp
