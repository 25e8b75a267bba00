#pragma once
// Copies between a GPU and host memory for staging: on a side stream of the
// GPU, ordered after the work the caller had queued, each copy's completion
// an event that one thread waits for (never the whole device). With a
// LibTorch without CUDA, or for CPU tensors, every copy is a plain
// synchronous one and every wait returns at once.

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "h5dcp/state_dict.hpp"

namespace h5dcp::detail {

/// Where the work queued on the caller's current streams stood when it was
/// made (one event per GPU of `tensors`), so that copies made later, on
/// another thread and another stream, see every change queued before.
/// Made in the caller's thread. Copyable, cheap.
class CallerWork {
 public:
  CallerWork() = default;
  explicit CallerWork(const std::vector<at::Tensor>& tensors);
  /// For every tensor (and shard) of `state_dict`.
  explicit CallerWork(const StateDict& state_dict);
  struct Marks;

 private:
  friend class DeviceToHost;
  friend class HostToDevice;
  std::shared_ptr<Marks> marks_;
};

/// Device -> host copies of a save's staging. One object per staging pass,
/// used by one thread.
class DeviceToHost {
 public:
  explicit DeviceToHost(const CallerWork& after);
  ~DeviceToHost();
  DeviceToHost(const DeviceToHost&) = delete;
  DeviceToHost& operator=(const DeviceToHost&) = delete;

  /// Starts copying `source` into `target` (host memory, pinned for the copy
  /// to be asynchronous); returns the copy's number. A CPU source is copied
  /// at once.
  std::size_t start(const at::Tensor& source, const at::Tensor& target);
  /// Waits until copy `n` (and every earlier one) is in host memory.
  void wait(std::size_t n);
  /// Whether copy `n` (and every earlier one) is in host memory; never waits.
  bool finished(std::size_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Host -> device copies of a load: every slab read into a pinned host
/// buffer is copied to its GPU target on a side stream while the next slab
/// is read. One object per load, used by one thread.
class HostToDevice {
 public:
  explicit HostToDevice(const CallerWork& after);
  ~HostToDevice();
  HostToDevice(const HostToDevice&) = delete;
  HostToDevice& operator=(const HostToDevice&) = delete;

  /// A host buffer to read a slab into, for `target`'s device: pinned (from
  /// LibTorch's caching host allocator, so reused) when `target` is on a GPU.
  /// At most two uploads stay in flight: this may wait for the oldest.
  at::Tensor buffer(at::IntArrayRef sizes, at::ScalarType dtype, const at::Tensor& target);
  /// Copies `host` (from buffer()) into `target`: asynchronously for a GPU
  /// target, at once otherwise.
  void copy(const at::Tensor& host, const at::Tensor& target);
  /// Waits for every copy, and orders the caller's current streams after
  /// them. Call before the targets are used.
  void finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace h5dcp::detail
