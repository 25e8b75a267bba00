#pragma once
// Move-only RAII for HDF5 ids. Copies are impossible on purpose: in parallel
// HDF5 closing a file (and what hangs off it) is collective, and ref-counted
// copies that die at different times on different ranks can hang a job.
// close() reports failure by throwing; the destructor never throws.

#include <hdf5.h>

#include <string>

namespace h5dcp::detail {

class Handle {
 public:
  using Closer = herr_t (*)(hid_t);

  Handle() = default;
  /// Takes ownership of `id` (which must be valid), closed with `closer`.
  Handle(hid_t id, Closer closer) noexcept : id_(id), closer_(closer) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = other.id_;
      closer_ = other.closer_;
      other.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  ~Handle() { reset(); }

  hid_t get() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }

  /// Closes now; throws IoError with HDF5's error stack when that fails.
  void close(const std::string& what);

  /// Forgets the id without closing it: for a file whose collective close
  /// cannot happen because a rank is gone (HDF5 closes it at exit).
  void abandon() noexcept { id_ = H5I_INVALID_HID; }

 private:
  void reset() noexcept {
    if (id_ >= 0) closer_(id_);
    id_ = H5I_INVALID_HID;
  }

  hid_t id_ = H5I_INVALID_HID;
  Closer closer_ = nullptr;
};

}  // namespace h5dcp::detail
