#pragma once
// Between LibTorch scalar types and h5dcp dtypes.

#include <c10/core/ScalarType.h>

#include <optional>

#include "h5dcp/dtype.hpp"

namespace h5dcp::detail {

/// The h5dcp dtype of a torch scalar type; nullopt when h5dcp cannot store it
/// (quantized, bits, float4, sub-byte integers, ...).
std::optional<DType> to_dtype(c10::ScalarType type) noexcept;

c10::ScalarType to_scalar_type(DType dtype) noexcept;

}  // namespace h5dcp::detail
