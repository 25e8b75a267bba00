// GPU <-> host copies for staging, through LibTorch's device-generic c10
// stream and event interfaces (no CUDA header needed; see utils_to_device.cpp).

#include "torch/device_copies.hpp"

#include <ATen/ops/empty.h>

#include <deque>
#include <map>
#include <utility>

#include "torch/nested_apply.hpp"

#if defined(H5DCP_WITH_CUDA) && H5DCP_WITH_CUDA
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#define H5DCP_DEVICE_COPIES 1
#else
#define H5DCP_DEVICE_COPIES 0
#endif

namespace h5dcp::detail {

#if H5DCP_DEVICE_COPIES

namespace {

const c10::impl::DeviceGuardImplInterface& guard_of(c10::Device device) {
  return *c10::impl::getDeviceGuardImpl(device.type());
}

// An event recorded on `stream` now.
c10::Event recorded_on(const c10::Stream& stream) {
  c10::Event event(stream.device_type());
  event.record(stream);
  return event;
}

}  // namespace

struct CallerWork::Marks {
  std::map<c10::DeviceIndex, c10::Event> events;  // per GPU: the caller's current stream, then
};

CallerWork::CallerWork(const std::vector<at::Tensor>& tensors) : marks_(std::make_shared<Marks>()) {
  for (const auto& tensor : tensors) {
    if (!tensor.defined() || !tensor.is_cuda()) continue;
    const auto device = tensor.device();
    if (marks_->events.count(device.index()) == 0)
      marks_->events.emplace(device.index(), recorded_on(guard_of(device).getStream(device)));
  }
}

CallerWork::CallerWork(const StateDict& state_dict) {
  // Walked only where a tensor can be on a GPU: not for every load and async
  // save of a machine without one.
  if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA) ||
      guard_of(c10::Device(c10::DeviceType::CUDA)).deviceCount() == 0)
    return;
  std::vector<at::Tensor> tensors;
  TensorPath path;
  apply_to_tensors_at(state_dict, path, [&](const at::Tensor& t, const TensorPath&) {
    tensors.push_back(t);
    return t;
  });
  *this = CallerWork(tensors);
}

namespace {

// Side streams of one staging pass, one per GPU, each made to wait for the
// caller's work on that GPU before its first copy.
class SideStreams {
 public:
  explicit SideStreams(std::shared_ptr<CallerWork::Marks> marks) : marks_(std::move(marks)) {}

  const c10::Stream& of(c10::Device device) {
    auto found = streams_.find(device.index());
    if (found != streams_.end()) return found->second;
    const auto stream = guard_of(device).getStreamFromGlobalPool(device);
    if (marks_) {
      const auto mark = marks_->events.find(device.index());
      if (mark != marks_->events.end()) mark->second.block(stream);
    }
    return streams_.emplace(device.index(), stream).first->second;
  }

  const std::map<c10::DeviceIndex, c10::Stream>& all() const { return streams_; }

 private:
  std::shared_ptr<CallerWork::Marks> marks_;
  std::map<c10::DeviceIndex, c10::Stream> streams_;
};

// A copy in flight: done when its event is; holds the memory it reads from.
struct InFlight {
  std::size_t number = 0;
  c10::Event done;
  at::Tensor keep;
};

void wait_for(std::deque<InFlight>& in_flight, std::size_t up_to) {
  while (!in_flight.empty() && in_flight.front().number <= up_to) {
    in_flight.front().done.synchronize();
    in_flight.pop_front();
  }
}

// Destructors wait too: memory a copy still reads or writes must not be
// freed or reused under it.
void drain(std::deque<InFlight>& in_flight) noexcept {
  try {
    for (auto& copy : in_flight) copy.done.synchronize();
  } catch (...) {
  }
  in_flight.clear();
}

// Copies of one pass, in either direction: their side streams, and those
// still in flight, oldest first.
struct SideCopies {
  explicit SideCopies(std::shared_ptr<CallerWork::Marks> marks) : side(std::move(marks)) {}
  SideStreams side;
  std::deque<InFlight> in_flight;
  std::size_t next = 0;
};

}  // namespace

struct DeviceToHost::Impl : SideCopies {
  using SideCopies::SideCopies;
};

DeviceToHost::DeviceToHost(const CallerWork& after) : impl_(std::make_unique<Impl>(after.marks_)) {}

DeviceToHost::~DeviceToHost() { drain(impl_->in_flight); }

std::size_t DeviceToHost::start(const at::Tensor& source, const at::Tensor& target) {
  const auto number = impl_->next++;
  if (!source.is_cuda()) {
    target.copy_(source);
    return number;
  }
  const auto& stream = impl_->side.of(source.device());
  {
    const c10::StreamGuard on_side(stream);
    // Asynchronous when `target` is pinned; ordered after the caller's work
    // by the side stream's wait on its event.
    target.copy_(source, /*non_blocking=*/true);
  }
  impl_->in_flight.push_back(InFlight{number, recorded_on(stream), source});
  return number;
}

void DeviceToHost::wait(std::size_t n) { wait_for(impl_->in_flight, n); }

bool DeviceToHost::finished(std::size_t n) {
  auto& in_flight = impl_->in_flight;
  while (!in_flight.empty() && in_flight.front().number <= n && in_flight.front().done.query()) in_flight.pop_front();
  return in_flight.empty() || in_flight.front().number > n;
}

struct HostToDevice::Impl : SideCopies {
  using SideCopies::SideCopies;
};

HostToDevice::HostToDevice(const CallerWork& after) : impl_(std::make_unique<Impl>(after.marks_)) {}

HostToDevice::~HostToDevice() { drain(impl_->in_flight); }

at::Tensor HostToDevice::buffer(at::IntArrayRef sizes, at::ScalarType dtype, const at::Tensor& target) {
  auto options = at::TensorOptions().dtype(dtype).device(at::kCPU);
  if (!target.is_cuda()) return at::empty(sizes, options);
  // Two uploads in flight are enough to keep the copy engine busy while the
  // next slab is read, and bound the pinned memory held.
  constexpr std::size_t kInFlight = 2;
  if (impl_->in_flight.size() >= kInFlight) wait_for(impl_->in_flight, impl_->in_flight.front().number);
  return at::empty(sizes, options.pinned_memory(true));
}

void HostToDevice::copy(const at::Tensor& host, const at::Tensor& target) {
  if (!target.is_cuda()) {
    target.copy_(host);
    return;
  }
  const auto& stream = impl_->side.of(target.device());
  {
    const c10::StreamGuard on_side(stream);
    target.copy_(host, /*non_blocking=*/host.is_pinned());
  }
  impl_->in_flight.push_back(InFlight{impl_->next++, recorded_on(stream), host});
}

void HostToDevice::finish() {
  for (const auto& [index, stream] : impl_->side.all()) {
    const auto device = stream.device();
    recorded_on(stream).block(guard_of(device).getStream(device));
  }
  if (!impl_->in_flight.empty()) wait_for(impl_->in_flight, impl_->in_flight.back().number);
}

#else  // no CUDA: plain copies

struct CallerWork::Marks {};

CallerWork::CallerWork(const std::vector<at::Tensor>& /*tensors*/) {}
CallerWork::CallerWork(const StateDict& /*state_dict*/) {}

struct DeviceToHost::Impl {
  std::size_t next = 0;
};

DeviceToHost::DeviceToHost(const CallerWork& /*after*/) : impl_(std::make_unique<Impl>()) {}
DeviceToHost::~DeviceToHost() = default;

std::size_t DeviceToHost::start(const at::Tensor& source, const at::Tensor& target) {
  target.copy_(source);
  return impl_->next++;
}

void DeviceToHost::wait(std::size_t /*n*/) {}

bool DeviceToHost::finished(std::size_t /*n*/) { return true; }

struct HostToDevice::Impl {};

HostToDevice::HostToDevice(const CallerWork& /*after*/) : impl_(std::make_unique<Impl>()) {}
HostToDevice::~HostToDevice() = default;

at::Tensor HostToDevice::buffer(at::IntArrayRef sizes, at::ScalarType dtype, const at::Tensor& /*target*/) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype).device(at::kCPU));
}

void HostToDevice::copy(const at::Tensor& host, const at::Tensor& target) { target.copy_(host); }

void HostToDevice::finish() {}

#endif

}  // namespace h5dcp::detail
