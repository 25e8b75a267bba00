#pragma once
// Blocks of tensors: the views reads fill.

#include <ATen/core/Tensor.h>

#include "h5dcp/plan.hpp"

namespace h5dcp::detail {

/// The view of `t` at `offsets` with `sizes` (one per dimension).
at::Tensor narrowed(at::Tensor t, const Shape& offsets, const Shape& sizes);

/// The block of `dest` that `item` fills (item.dest_offsets, item.lengths);
/// throws UsageError when it does not fit.
at::Tensor dest_block(const at::Tensor& dest, const ReadItem& item);

}  // namespace h5dcp::detail
