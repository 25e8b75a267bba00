#include "torch/dtype_mapping.hpp"

namespace h5dcp::detail {

std::optional<DType> to_dtype(c10::ScalarType type) noexcept {
  switch (type) {
    case c10::ScalarType::Double: return DType::Float64;
    case c10::ScalarType::Float: return DType::Float32;
    case c10::ScalarType::Half: return DType::Float16;
    case c10::ScalarType::BFloat16: return DType::BFloat16;
    case c10::ScalarType::Long: return DType::Int64;
    case c10::ScalarType::Int: return DType::Int32;
    case c10::ScalarType::Short: return DType::Int16;
    case c10::ScalarType::Char: return DType::Int8;
    case c10::ScalarType::Byte: return DType::UInt8;
    case c10::ScalarType::Bool: return DType::Bool;
    default: return std::nullopt;
  }
}

c10::ScalarType to_scalar_type(DType dtype) noexcept {
  switch (dtype) {
    case DType::Float64: return c10::ScalarType::Double;
    case DType::Float32: return c10::ScalarType::Float;
    case DType::Float16: return c10::ScalarType::Half;
    case DType::BFloat16: return c10::ScalarType::BFloat16;
    case DType::Int64: return c10::ScalarType::Long;
    case DType::Int32: return c10::ScalarType::Int;
    case DType::Int16: return c10::ScalarType::Short;
    case DType::Int8: return c10::ScalarType::Char;
    case DType::UInt8: return c10::ScalarType::Byte;
    case DType::Bool: return c10::ScalarType::Bool;
  }
  return c10::ScalarType::Undefined;
}

}  // namespace h5dcp::detail
