#include "torch/host_bytes.hpp"

#include <ATen/ops/empty.h>

namespace h5dcp::detail {

namespace {

// A copy in host memory: pinned for a GPU tensor, which the copy engine
// reaches directly, without a bounce buffer (LibTorch's caching host
// allocator reuses the memory afterwards).
at::Tensor on_host(const at::Tensor& tensor) {
  if (!tensor.is_cuda()) return tensor.to(at::kCPU);
  auto host = at::empty(tensor.sizes(), at::TensorOptions().dtype(tensor.scalar_type()).pinned_memory(true));
  host.copy_(tensor);
  return host;
}

}  // namespace

std::shared_ptr<const void> host_bytes(const at::Tensor& tensor) {
  auto host = tensor.device().is_cpu() ? tensor.contiguous() : on_host(tensor).contiguous();
  auto owner = std::make_shared<at::Tensor>(std::move(host));
  return std::shared_ptr<const void>(owner, owner->data_ptr());
}

}  // namespace h5dcp::detail
