#include "torch/torch_save_archive.hpp"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/durable_file.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/file_kind.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/pickle_reader.hpp"

namespace h5dcp::detail {
namespace {

std::string in_quotes(const std::string& path) { return "'" + path + "'"; }

// Runs `f`, turning LibTorch's exceptions (c10::Error, with backtraces) into
// a FormatError that says what was being done.
template <typename F>
auto zip_call(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const h5dcp::Error&) {
    throw;
  } catch (const c10::Error& e) {
    throw FormatError("h5dcp: " + what + " failed: " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw FormatError("h5dcp: " + what + " failed: " + e.what());
  }
}

std::string not_torch_save(const std::string& path, FileKind kind) {
  const auto name = in_quotes(path);
  switch (kind) {
    case FileKind::LegacyTorchSave:
      return "h5dcp: " + name +
             " is in torch.save's legacy format (PyTorch < 1.6, or saved with _use_new_zipfile_serialization=False), "
             "which h5dcp does not read. Re-save it in the zip format with Python: "
             "torch.save(torch.load(\"" +
             path + "\"), \"" + path + ".zip.pt\")";
    case FileKind::H5dcpCheckpoint: return "h5dcp: " + name + " is an h5dcp checkpoint, not a torch.save file";
    case FileKind::Hdf5: return "h5dcp: " + name + " is an HDF5 file, not a torch.save file";
    default: return "h5dcp: " + name + " is not a torch.save file (not a zip archive)";
  }
}

// Whether the record whose data starts at `data_offset` is stored
// uncompressed: its zip local header (signature PK\3\4, 30 bytes, then the
// name and extra field, which end where the data starts) says method 0.
bool stored_uncompressed(int fd, const std::string& path, std::uint64_t data_offset) {
  const auto le16 = [](const std::string& w, std::size_t at) {
    return static_cast<std::uint64_t>(static_cast<unsigned char>(w[at])) |
           static_cast<std::uint64_t>(static_cast<unsigned char>(w[at + 1])) << 8;
  };
  // Name and extra field are short in practice; at most 64 KiB together.
  for (const std::uint64_t reach : {std::uint64_t{4096}, std::uint64_t{65536 + 30}}) {
    const auto start = data_offset > reach ? data_offset - reach : 0;
    std::string window(static_cast<std::size_t>(data_offset - start), '\0');
    if (::pread(fd, window.data(), window.size(), static_cast<off_t>(start)) != static_cast<ssize_t>(window.size()))
      throw IoError("h5dcp: reading " + in_quotes(path) + " failed");
    for (auto at = window.rfind("PK\x03\x04"); at != std::string::npos;
         at = at == 0 ? std::string::npos : window.rfind("PK\x03\x04", at - 1)) {
      if (at + 30 <= window.size() && start + at + 30 + le16(window, at + 26) + le16(window, at + 28) == data_offset)
        return le16(window, at + 8) == 0;
    }
    if (start == 0) break;
  }
  throw FormatError("h5dcp: " + in_quotes(path) + " is damaged: no zip header before a record's data");
}

}  // namespace

TorchSaveReader::TorchSaveReader(const std::string& path) : path_(path) {
  const auto kind = detect_file_kind(path);  // IoError when missing or unreadable
  if (kind != FileKind::TorchSave) throw FormatError(not_torch_save(path, kind));
  zip_ = zip_call("reading the zip archive " + in_quotes(path),
                  [&] { return std::make_unique<caffe2::serialize::PyTorchStreamReader>(path); });
  if (!zip_->hasRecord("data.pkl"))
    throw FormatError("h5dcp: " + in_quotes(path) + " is a zip archive without data.pkl, so not a torch.save file");
  if (zip_->hasRecord("byteorder")) {
    auto [data, size] =
        zip_call("reading the byte order of " + in_quotes(path), [&] { return zip_->getRecord("byteorder"); });
    const std::string order(static_cast<const char*>(data.get()), size);
    if (order != "little")
      throw FormatError("h5dcp: " + in_quotes(path) + " was saved on a " + order +
                        "-endian machine; h5dcp reads little-endian files");
  }
}

TorchSaveReader::~TorchSaveReader() = default;

TorchSaveIndex TorchSaveReader::read_index() {
  auto [data, size] = zip_call("reading data.pkl of " + in_quotes(path_), [&] { return zip_->getRecord("data.pkl"); });
  const auto root = pickle::unpickle(std::string_view(static_cast<const char*>(data.get()), size), in_quotes(path_));
  auto index = index_torch_save(*root, in_quotes(path_));
  struct stat info {};
  if (::stat(path_.c_str(), &info) != 0)
    throw IoError("h5dcp: stat of " + in_quotes(path_) + " failed: " + std::strerror(errno));
  index.file_size = static_cast<std::uint64_t>(info.st_size);
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw IoError("h5dcp: opening " + in_quotes(path_) + " failed: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  for (auto& [key, storage] : index.storages) {
    const auto name = "data/" + key;
    if (!zip_->hasRecord(name))
      throw FormatError("h5dcp: " + in_quotes(path_) + " has no record " + name + " for a storage its data.pkl names");
    storage.data_offset =
        zip_call("locating " + name + " in " + in_quotes(path_), [&] { return zip_->getRecordOffset(name); });
    storage.stored = stored_uncompressed(fd, path_, storage.data_offset);
    const auto bytes = static_cast<std::uint64_t>(storage.numel) * dtype_size(storage.dtype);
    if (storage.stored && storage.data_offset + bytes > index.file_size)
      throw FormatError("h5dcp: " + in_quotes(path_) + " is truncated: record " + name +
                        " runs past the end of the file");
  }
  return index;
}

at::Tensor TorchSaveReader::read_storage(const std::string& key, const TorchStorageInfo& info) {
  const auto options = at::TensorOptions().dtype(to_scalar_type(info.dtype));
  const auto bytes = static_cast<std::size_t>(info.numel) * dtype_size(info.dtype);
  if (bytes == 0) return at::empty({0}, options);
  const auto name = "data/" + key;
  auto [data, size] = zip_call("reading " + name + " of " + in_quotes(path_), [&] { return zip_->getRecord(name); });
  if (size < bytes)
    throw FormatError("h5dcp: record " + name + " of " + in_quotes(path_) + " has " + std::to_string(size) +
                      " bytes, its storage needs " + std::to_string(bytes));
  c10::Storage storage(c10::Storage::use_byte_size_t(), size, std::move(data), nullptr, false);
  auto tensor = at::empty({0}, options);
  tensor.set_(storage, 0, {info.numel}, {1});
  return tensor;
}

at::Tensor view_of(const at::Tensor& storage, const TorchTensorInfo& tensor) {
  return storage.as_strided(tensor.sizes, tensor.strides, tensor.storage_offset);
}

// --- writing ------------------------------------------------------------------

TorchSaveWriter::TorchSaveWriter(const std::string& path) : path_(path), temp_path_(temporary_sibling(path)) {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) throw IoError("h5dcp: creating " + in_quotes(temp_path_) + " failed: " + std::strerror(errno));
  // The zip writer sees every write succeed; failures are kept and reported
  // by check_io, so LibTorch never throws from inside its own destructor.
  zip_ = std::make_unique<caffe2::serialize::PyTorchStreamWriter>(
      [this](const void* data, std::size_t size) { return write_bytes(data, size); });
}

TorchSaveWriter::~TorchSaveWriter() {
  if (committed_) return;
  discarding_ = true;
  try {
    zip_.reset();  // writes the end of the archive, into nothing
  } catch (...) {
  }
  if (fd_ >= 0) ::close(fd_);
  remove_quietly(temp_path_);
}

std::size_t TorchSaveWriter::write_bytes(const void* data, std::size_t size) noexcept {
  if (discarding_ || io_errno_ != 0) return size;
  io_errno_ = write_fully(fd_, data, size);
  return size;
}

void TorchSaveWriter::check_io(const std::string& what) {
  if (io_errno_ != 0)
    throw IoError("h5dcp: " + what + " in " + in_quotes(temp_path_) + " failed: " + std::strerror(io_errno_));
}

void TorchSaveWriter::write_record(const std::string& name, const void* data, std::size_t size) {
  try {
    zip_->writeRecord(name, data, size);
  } catch (const c10::Error& e) {
    throw IoError("h5dcp: writing record " + name + " of " + in_quotes(path_) +
                  " failed: " + e.what_without_backtrace());
  }
  check_io("writing record " + name);
}

void TorchSaveWriter::commit() {
  // As torch.save >= 2.1 writes: readers on big-endian hosts need it, older ones ignore it.
  write_record("byteorder", "little", 6);
  try {
    zip_->writeEndOfFile();
  } catch (const c10::Error& e) {
    throw IoError("h5dcp: finishing " + in_quotes(path_) + " failed: " + e.what_without_backtrace());
  }
  check_io("finishing the archive");
  if (::fsync(fd_) != 0) throw IoError("h5dcp: fsync of " + in_quotes(temp_path_) + " failed: " + std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw IoError("h5dcp: closing " + in_quotes(temp_path_) + " failed: " + std::strerror(errno));
  publish_by_rename(temp_path_, path_);
  committed_ = true;
}

}  // namespace h5dcp::detail
