#pragma once
// Move-only RAII for HDF5 ids. Copies are impossible on purpose: in parallel
// HDF5 closing a file (and what hangs off it) is collective, and ref-counted
// copies that die at different times on different ranks can hang a job.
// close() reports failure by throwing; the destructor never throws.

#include <cstdint>
#include <string>

namespace h5dcp::detail {

/// HDF5's hid_t, named without <hdf5.h>: the layers above hdf5/ hold ids
/// (Handle) but must compile without HDF5's headers (hdf5_error.cpp checks
/// that the types are the same).
using Hid = std::int64_t;
inline constexpr Hid kInvalidHid = -1;

class Handle {
 public:
  using Closer = int (*)(Hid);  // H5Fclose, H5Dclose, ...: herr_t (*)(hid_t)

  Handle() = default;
  /// Takes ownership of `id` (which must be valid), closed with `closer`.
  Handle(Hid id, Closer closer) noexcept : id_(id), closer_(closer) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& other) noexcept : id_(other.id_), closer_(other.closer_) { other.id_ = kInvalidHid; }
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = other.id_;
      closer_ = other.closer_;
      other.id_ = kInvalidHid;
    }
    return *this;
  }
  ~Handle() { reset(); }

  Hid get() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }

  /// Closes now; throws IoError with HDF5's error stack when that fails.
  void close(const std::string& what);

  /// Forgets the id without closing it: for a file whose collective close
  /// cannot happen because a rank is gone (HDF5 closes it at exit).
  void abandon() noexcept { id_ = kInvalidHid; }

 private:
  void reset() noexcept {
    if (id_ >= 0) closer_(id_);
    id_ = kInvalidHid;
  }

  Hid id_ = kInvalidHid;
  Closer closer_ = nullptr;
};

}  // namespace h5dcp::detail
