// recursive_to: nested tensors to a device; host -> CUDA copies on a side
// stream when h5dcp is built against a LibTorch with CUDA.

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

#include <string>

#include "h5dcp/error.hpp"
#include "h5dcp/training/utils.hpp"
#include "torch/nested_apply.hpp"

// H5DCP_WITH_CUDA is set by cmake/H5dcpCuda.cmake when the LibTorch found
// has CUDA. Only LibTorch's device-generic c10 interfaces are used, so no
// CUDA header is needed even then.
#if defined(H5DCP_WITH_CUDA) && H5DCP_WITH_CUDA
#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#define H5DCP_SIDE_STREAM_COPIES 1
#else
#define H5DCP_SIDE_STREAM_COPIES 0
#endif

namespace h5dcp {
namespace {

#if H5DCP_SIDE_STREAM_COPIES
// DDP's copy: on a side stream of the target device, which the current
// stream then waits for; recording the copy on the current stream keeps the
// caching allocator from handing its memory to the side stream while work
// queued on the current stream may still read it.
at::Tensor copy_on_side_stream(const at::Tensor& source, c10::Device target) {
  const c10::DeviceGuard device_guard(target);  // "cuda" without an index: the current device
  const c10::Device device = device_guard.current_device();
  const auto* impl = c10::impl::getDeviceGuardImpl(device.type());
  const c10::Stream current = impl->getStream(device);
  const c10::Stream side = impl->getStreamFromGlobalPool(device);
  at::Tensor copy;
  {
    const c10::StreamGuard stream_guard(side);
    copy = source.to(source.options().device(device), /*non_blocking=*/source.is_pinned());
  }
  c10::Event copied(device.type());
  copied.record(side);
  copied.block(current);
  copy.record_stream(current);
  return copy;
}
#endif

at::Tensor move(const at::Tensor& tensor, c10::Device device, bool use_side_stream) {
  if (tensor.device() == device) return tensor;
#if H5DCP_SIDE_STREAM_COPIES
  if (use_side_stream && device.is_cuda() && tensor.device().is_cpu()) return copy_on_side_stream(tensor, device);
#else
  (void)use_side_stream;  // nothing to overlap without CUDA
#endif
  return tensor.to(device);
}

// LibTorch's errors (c10::Error: "Torch not compiled with CUDA enabled", an
// invalid device index) become UsageErrors naming the tensor.
at::Tensor move_or_explain(const at::Tensor& tensor, c10::Device device, bool use_side_stream,
                           const std::string& what) {
  try {
    return move(tensor, device, use_side_stream);
  } catch (const c10::Error& e) {
    throw UsageError("h5dcp: cannot move " + what + " from " + tensor.device().str() + " to " + device.str() + ": " +
                     e.what_without_backtrace());
  }
}

TensorFn mover(c10::Device device, bool use_side_stream) {
  return [device, use_side_stream](const at::Tensor& t) {
    return move_or_explain(t, device, use_side_stream, "a tensor");
  };
}

detail::PathTensorFn path_mover(c10::Device device, bool use_side_stream) {
  return [device, use_side_stream](const at::Tensor& t, const detail::TensorPath& path) {
    return move_or_explain(t, device, use_side_stream, path.empty() ? "a tensor" : "'" + fqn_of(path) + "'");
  };
}

}  // namespace

StateDict recursive_to(const StateDict& state_dict, c10::Device device, bool use_side_stream) {
  detail::TensorPath path;
  return detail::apply_to_tensors_at(state_dict, path, path_mover(device, use_side_stream));
}

StateValue recursive_to(const StateValue& value, c10::Device device, bool use_side_stream) {
  detail::TensorPath path;
  return detail::apply_to_tensors_at(value, path, path_mover(device, use_side_stream));
}

c10::IValue recursive_to(const c10::IValue& value, c10::Device device, bool use_side_stream) {
  return apply_to_tensors(value, mover(device, use_side_stream));
}

std::vector<c10::IValue> recursive_to(const std::vector<c10::IValue>& inputs, c10::Device device,
                                      bool use_side_stream) {
  return apply_to_tensors(inputs, mover(device, use_side_stream));
}

IValueKwargs recursive_to(const IValueKwargs& kwargs, c10::Device device, bool use_side_stream) {
  return apply_to_tensors(kwargs, mover(device, use_side_stream));
}

}  // namespace h5dcp
