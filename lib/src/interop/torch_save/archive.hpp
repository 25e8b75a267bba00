#pragma once
// The zip container of torch.save files: read through LibTorch's own
// PyTorchStreamReader (caffe2/serialize), kept out of this header, whose
// records are read whole or located for direct reads; written through
// formats/zip_writer, which takes a record in pieces, so that a writer never
// holds a record whole.

#include <ATen/core/Tensor.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "formats/torch_save_index.hpp"
#include "formats/zip_writer.hpp"
#include "storage/file_descriptor.hpp"

namespace caffe2::serialize {
class PyTorchStreamReader;
}  // namespace caffe2::serialize

namespace h5dcp::detail {

/// Where an archive lies in its file: the whole file (length 0 and offset 0),
/// or `length` bytes at `offset` (an item of a DCP .distcp file).
struct ArchiveWindow {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool whole() const noexcept { return offset == 0 && length == 0; }
};

class TorchSaveReader {
 public:
  /// Opens the torch.save archive in `path` (the whole file, or `window` of
  /// it). Throws FormatError saying what the file is when it is not a zip
  /// torch.save file (for the legacy format: how to re-save it), or when the
  /// window does not lie in the file; IoError when it cannot be read.
  explicit TorchSaveReader(const std::string& path, const ArchiveWindow& window = {});
  ~TorchSaveReader();

  /// data.pkl, unpickled and indexed; every storage's data offset in the
  /// file is filled in and checked against the file size.
  TorchSaveIndex read_index();

  /// The object saved (any object index_torch_object takes), indexed as the
  /// entry `fqn`; storage offsets are filled in as read_index does. `what`
  /// names the archive in errors.
  TorchSaveIndex read_object_index(const std::string& fqn, const std::string& what);

  /// The storage `key` whole: a 1-D CPU tensor of its dtype and numel that
  /// owns the record's memory.
  at::Tensor read_storage(const std::string& key, const TorchStorageInfo& info);

  const std::string& path() const noexcept { return path_; }

 private:
  // Fills in each storage's offset in the file and checks it against the archive.
  void locate_storages(TorchSaveIndex& index);

  std::string path_;
  std::uint64_t base_ = 0;       // where the archive starts in the file
  std::uint64_t size_ = 0;       // its bytes
  std::uint64_t file_size_ = 0;  // the file's bytes
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

  /// Writes the record `name` ("data.pkl", "data/0", ...) now. Throws IoError.
  void write_record(const std::string& name, const void* data, std::size_t size);

  /// A record written in pieces, so that it is never held whole: `size`
  /// bytes in all, given to append_record in order. Throws IoError.
  void begin_record(const std::string& name, std::uint64_t size);
  void append_record(const void* data, std::size_t size);
  void end_record();

  /// Ends the archive, fsyncs it and renames it to the path. Throws IoError.
  void commit();

 private:
  std::string path_;
  std::string temp_path_;
  detail::FileDescriptor fd_;
  bool committed_ = false;
  std::unique_ptr<ZipWriter> zip_;
};

/// One record of a torch.save archive ("data.pkl", "data/0").
struct ArchiveRecord {
  std::string name;
  const void* data = nullptr;
  std::size_t size = 0;
};

/// Writes a torch.save archive of `records` (and its byteorder record) at
/// the current end of the open file `fd`, named `path` in errors, as one
/// item of a DCP .distcp file; returns its length in bytes. Throws IoError.
std::uint64_t append_torch_save_archive(int fd, const std::string& path, const std::vector<ArchiveRecord>& records);

}  // namespace h5dcp::detail
