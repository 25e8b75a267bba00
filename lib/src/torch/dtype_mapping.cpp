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
    case c10::ScalarType::UInt16: return DType::UInt16;
    case c10::ScalarType::UInt32: return DType::UInt32;
    case c10::ScalarType::UInt64: return DType::UInt64;
    case c10::ScalarType::Float8_e4m3fn: return DType::Float8_e4m3fn;
    case c10::ScalarType::Float8_e5m2: return DType::Float8_e5m2;
    case c10::ScalarType::Float8_e4m3fnuz: return DType::Float8_e4m3fnuz;
    case c10::ScalarType::Float8_e5m2fnuz: return DType::Float8_e5m2fnuz;
    case c10::ScalarType::Float8_e8m0fnu: return DType::Float8_e8m0fnu;
    case c10::ScalarType::ComplexHalf: return DType::Complex32;
    case c10::ScalarType::ComplexFloat: return DType::Complex64;
    case c10::ScalarType::ComplexDouble: return DType::Complex128;
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
    case DType::UInt16: return c10::ScalarType::UInt16;
    case DType::UInt32: return c10::ScalarType::UInt32;
    case DType::UInt64: return c10::ScalarType::UInt64;
    case DType::Float8_e4m3fn: return c10::ScalarType::Float8_e4m3fn;
    case DType::Float8_e5m2: return c10::ScalarType::Float8_e5m2;
    case DType::Float8_e4m3fnuz: return c10::ScalarType::Float8_e4m3fnuz;
    case DType::Float8_e5m2fnuz: return c10::ScalarType::Float8_e5m2fnuz;
    case DType::Float8_e8m0fnu: return c10::ScalarType::Float8_e8m0fnu;
    case DType::Complex32: return c10::ScalarType::ComplexHalf;
    case DType::Complex64: return c10::ScalarType::ComplexFloat;
    case DType::Complex128: return c10::ScalarType::ComplexDouble;
  }
  return c10::ScalarType::Undefined;
}

}  // namespace h5dcp::detail
