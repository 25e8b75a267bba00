#pragma once
// Tensor bytes for HDF5: contiguous, in host memory.

#include <ATen/core/Tensor.h>

#include <memory>

namespace h5dcp::detail {

/// The bytes of `tensor` contiguous in host memory (the tensor itself when it
/// already is, a copy otherwise), kept alive by the returned pointer.
std::shared_ptr<const void> host_bytes(const at::Tensor& tensor);

}  // namespace h5dcp::detail
