#include "torch/host_bytes.hpp"

namespace h5dcp::detail {

std::shared_ptr<const void> host_bytes(const at::Tensor& tensor) {
  auto host = tensor.device().is_cpu() ? tensor.contiguous() : tensor.to(at::kCPU).contiguous();
  auto owner = std::make_shared<at::Tensor>(std::move(host));
  return std::shared_ptr<const void>(owner, owner->data_ptr());
}

}  // namespace h5dcp::detail
