#pragma once
// Reading a checkpoint from one process, piece by piece: its metadata, its
// non-tensor values, and any tensor or block of a tensor, without loading the
// rest. What tools (inspect, diff, conversions) use; training jobs use the
// collective load().

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "h5dcp/metadata.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp {

class CheckpointReader {
 public:
  /// Opens the checkpoint at `path` read-only and reads its metadata and
  /// values. Not collective (serial HDF5 I/O; MPI need not be initialized).
  /// Throws FormatError when `path` is missing, not an h5dcp checkpoint,
  /// damaged, or of a newer major format version; IoError on I/O errors.
  explicit CheckpointReader(const std::string& path);
  ~CheckpointReader();
  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& path() const noexcept;
  const Metadata& metadata() const noexcept;

  /// The non-tensor value at `fqn`. Throws UsageError when there is none.
  StateValue value(const std::string& fqn) const;

  /// The whole tensor at `fqn` (CPU, contiguous, its stored dtype).
  at::Tensor read_tensor(const std::string& fqn);

  /// The block `box` (global offsets and sizes) of the tensor at `fqn`.
  /// Throws UsageError when `box` is not inside the tensor, IoError when
  /// reading fails.
  at::Tensor read_block(const std::string& fqn, const ChunkStorageMetadata& box);

  /// Closes the file; throws IoError when that fails. The destructor closes
  /// it too, silently.
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace h5dcp
