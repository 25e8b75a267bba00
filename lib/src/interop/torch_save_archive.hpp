#pragma once
// The zip container of torch.save files, through LibTorch's own
// PyTorchStreamReader / PyTorchStreamWriter (caffe2/serialize), kept out of
// this header: records are read whole or located for direct reads, and
// written one at a time, so a writer never holds more than one record.

#include <ATen/core/Tensor.h>

#include <exception>
#include <memory>
#include <string>

#include "interop/torch_save_index.hpp"
#include "storage/file_descriptor.hpp"

namespace caffe2::serialize {
class PyTorchStreamReader;
class PyTorchStreamWriter;
}  // namespace caffe2::serialize

namespace h5dcp::detail {

class TorchSaveReader {
 public:
  /// Opens the torch.save file `path`. Throws FormatError saying what the
  /// file is when it is not a zip torch.save file (for the legacy format: how
  /// to re-save it), IoError when it cannot be read.
  explicit TorchSaveReader(const std::string& path);
  ~TorchSaveReader();
  TorchSaveReader(const TorchSaveReader&) = delete;
  TorchSaveReader& operator=(const TorchSaveReader&) = delete;

  /// data.pkl, unpickled and indexed; every storage's data offset in the
  /// file is filled in and checked against the file size.
  TorchSaveIndex read_index();

  /// The storage `key` whole: a 1-D CPU tensor of its dtype and numel that
  /// owns the record's memory.
  at::Tensor read_storage(const std::string& key, const TorchStorageInfo& info);

  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> zip_;
};

/// The tensor `tensor` describes, as a view of `storage` (from read_storage).
at::Tensor view_of(const at::Tensor& storage, const TorchTensorInfo& tensor);

class TorchSaveWriter {
 public:
  /// Starts the torch.save file `path` under a temporary name in the same
  /// directory. Throws IoError when it cannot be created.
  explicit TorchSaveWriter(const std::string& path);
  /// Abandons an uncommitted file: the temporary file is removed.
  ~TorchSaveWriter();
  TorchSaveWriter(const TorchSaveWriter&) = delete;
  TorchSaveWriter& operator=(const TorchSaveWriter&) = delete;

  /// Writes the record `name` ("data.pkl", "data/0", ...) now. Throws IoError.
  void write_record(const std::string& name, const void* data, std::size_t size);

  /// Ends the archive, fsyncs it and renames it to the path. Throws IoError.
  void commit();

 private:
  std::size_t write_bytes(const void* data, std::size_t size) noexcept;
  void check_io(const std::string& what);

  std::string path_;
  std::string temp_path_;
  detail::FileDescriptor fd_;
  int io_errno_ = 0;         // first write failure, reported by check_io
  bool discarding_ = false;  // abandoned: the zip's remaining bytes go nowhere
  bool committed_ = false;
  std::unique_ptr<caffe2::serialize::PyTorchStreamWriter> zip_;
};

}  // namespace h5dcp::detail
