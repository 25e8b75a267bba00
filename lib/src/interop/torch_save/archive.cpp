#include "interop/torch_save/archive.hpp"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "formats/pickle_reader.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/file_kind.hpp"
#include "storage/durable_file.hpp"
#include "torch/dtype_mapping.hpp"

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

// hostile-input limit: The zip container's limits, far above what torch.save writes (one record
// per storage, plus data.pkl, version, byteorder and a few more; names of
// the form "<archive>/data/<key>", where <archive> is the file's name
// without its extension, at most NAME_MAX = 255 bytes).
constexpr std::uint64_t kMaxZipEntries = std::uint64_t{1} << 22;
constexpr std::uint64_t kMaxRecordNameBytes = 4096;

// Sizes of the zip structures h5dcp reads (APPNOTE.TXT 4.3).
constexpr std::size_t kEndRecordBytes = 22;
constexpr std::size_t kZip64LocatorBytes = 20;
constexpr std::size_t kZip64EndRecordBytes = 56;
constexpr std::size_t kDirectoryEntryBytes = 46;

std::uint64_t le(const char* p, std::size_t bytes) {
  std::uint64_t value = 0;
  for (std::size_t i = bytes; i-- > 0;) value = (value << 8) | static_cast<unsigned char>(p[i]);
  return value;
}

// A zip archive: a whole file, or the bytes [offset, offset + length) of
// one (a DCP .distcp file holds one torch.save archive per item).
class ZipFile {
 public:
  ZipFile(const std::string& path, const ArchiveWindow& window) : path_(path), base_(window.offset) {
    fd_ = open_input_file(path, "a torch.save file");
    struct stat info {};
    if (::fstat(fd_.get(), &info) != 0)
      throw IoError("h5dcp: stat of " + in_quotes(path) + " failed: " + std::strerror(errno));
    file_size_ = static_cast<std::uint64_t>(info.st_size);
    size_ = window.whole() ? file_size_ : window.length;
    if (base_ > file_size_ || size_ > file_size_ - base_)
      throw FormatError("h5dcp: " + in_quotes(path) + " is truncated: it has " + std::to_string(file_size_) +
                        " bytes, and an archive is said to lie at bytes [" + std::to_string(base_) + ", " +
                        std::to_string(base_ + size_) + ")");
  }
  ZipFile(const ZipFile&) = delete;
  ZipFile& operator=(const ZipFile&) = delete;

  std::uint64_t size() const noexcept { return size_; }
  std::uint64_t base() const noexcept { return base_; }
  std::uint64_t file_size() const noexcept { return file_size_; }

  // `bytes` bytes at `offset` of the archive, which the caller checked lie inside it.
  std::string read(std::uint64_t offset, std::uint64_t bytes) const {
    std::string out(static_cast<std::size_t>(bytes), '\0');
    read_into(out.data(), out.size(), offset);
    return out;
  }
  void read_into(void* out, std::size_t bytes, std::uint64_t offset) const {
    if (read_at(fd_.get(), out, bytes, base_ + offset, path_) != bytes) throw_errno("reading " + in_quotes(path_), EIO);
  }

 private:
  std::string path_;
  FileDescriptor fd_;
  std::uint64_t base_ = 0;
  std::uint64_t size_ = 0;
  std::uint64_t file_size_ = 0;
};

// LibTorch's zip reader over a ZipFile, so that it reads a window of a file.
class ZipFileAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit ZipFileAdapter(std::shared_ptr<const ZipFile> file) : file_(std::move(file)) {}
  std::size_t size() const override { return static_cast<std::size_t>(file_->size()); }
  std::size_t read(std::uint64_t pos, void* buf, std::size_t n, const char* /*what*/) const override {
    if (pos >= file_->size()) return 0;
    n = static_cast<std::size_t>(std::min<std::uint64_t>(n, file_->size() - pos));
    file_->read_into(buf, n, pos);
    return n;
  }

 private:
  std::shared_ptr<const ZipFile> file_;
};

[[noreturn]] void damaged_zip(const std::string& path, const std::string& what) {
  throw FormatError("h5dcp: " + in_quotes(path) + " is not a torch.save file h5dcp can read: " + what);
}

struct ZipDirectory {
  std::uint64_t entries = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

// Where the central directory is, from the end record (the last one, as
// miniz finds it) and, when a zip64 locator precedes it, zip64's end record.
ZipDirectory find_directory(const ZipFile& file, const std::string& path) {
  const auto tail_bytes = std::min<std::uint64_t>(file.size(), 65535 + kEndRecordBytes);
  const auto tail_start = file.size() - tail_bytes;
  const auto tail = file.read(tail_start, tail_bytes);
  auto at =
      tail.size() >= kEndRecordBytes ? tail.rfind("PK\x05\x06", tail.size() - kEndRecordBytes) : std::string::npos;
  if (at == std::string::npos) damaged_zip(path, "it has no zip end record (a truncated or damaged file)");
  const char* end = tail.data() + at;
  ZipDirectory dir{le(end + 10, 2), le(end + 16, 4), le(end + 12, 4)};
  const auto end_offset = tail_start + at;
  if (end_offset >= kZip64LocatorBytes) {
    const auto locator = file.read(end_offset - kZip64LocatorBytes, kZip64LocatorBytes);
    if (locator.compare(0, 4, "PK\x06\x07") == 0) {
      const auto zip64_offset = le(locator.data() + 8, 8);
      if (zip64_offset > file.size() || file.size() - zip64_offset < kZip64EndRecordBytes)
        damaged_zip(path, "its zip64 end record lies outside the file");
      const auto zip64 = file.read(zip64_offset, kZip64EndRecordBytes);
      if (zip64.compare(0, 4, "PK\x06\x06") != 0) damaged_zip(path, "its zip64 end record is missing");
      dir = {le(zip64.data() + 32, 8), le(zip64.data() + 48, 8), le(zip64.data() + 40, 8)};
    }
  }
  if (dir.entries > kMaxZipEntries)
    damaged_zip(path, "its zip directory claims " + std::to_string(dir.entries) + " records, more than " +
                          std::to_string(kMaxZipEntries));
  if (dir.offset > file.size() || dir.size > file.size() - dir.offset || dir.size / kDirectoryEntryBytes < dir.entries)
    damaged_zip(path, "its zip directory (" + std::to_string(dir.entries) + " records, " + std::to_string(dir.size) +
                          " bytes at " + std::to_string(dir.offset) + ") does not fit in the file's " +
                          std::to_string(file.size()) + " bytes");
  return dir;
}

// Checks the zip's central directory before LibTorch's reader trusts it: a
// bounded number of records with short names, every one stored
// uncompressed. torch.save stores its records; a compressed one is refused,
// because its size cannot be checked against the file (a few KB of deflate
// stream inflate to GBs) and because records are read in place.
void check_zip_directory(const ZipFile& file, const std::string& path) {
  const auto dir = find_directory(file, path);
  const auto entries = file.read(dir.offset, dir.size);
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < dir.entries; ++i) {
    if (entries.size() - at < kDirectoryEntryBytes || entries.compare(at, 4, "PK\x01\x02") != 0)
      damaged_zip(path, "its zip directory is damaged at record " + std::to_string(i));
    const char* entry = entries.data() + at;
    const auto method = le(entry + 10, 2);
    const auto name_bytes = le(entry + 28, 2);
    const auto rest = name_bytes + le(entry + 30, 2) + le(entry + 32, 2);  // name, extra field, comment
    if (entries.size() - at - kDirectoryEntryBytes < rest)
      damaged_zip(path, "its zip directory is damaged at record " + std::to_string(i));
    if (name_bytes > kMaxRecordNameBytes)
      damaged_zip(path, "record " + std::to_string(i) + " of its zip has a name of " + std::to_string(name_bytes) +
                            " bytes, more than " + std::to_string(kMaxRecordNameBytes));
    const std::string name(entry + kDirectoryEntryBytes, static_cast<std::size_t>(name_bytes));
    if (method != 0)
      throw FormatError("h5dcp: record " + name + " of " + in_quotes(path) + " is compressed (zip method " +
                        std::to_string(method) +
                        "); torch.save stores every record uncompressed, and h5dcp reads them in place, checked "
                        "against the file's size: re-save the file with torch.save "
                        "(torch.save(torch.load(path), new_path))");
    at += kDirectoryEntryBytes + static_cast<std::size_t>(rest);
  }
}

}  // namespace

TorchSaveReader::TorchSaveReader(const std::string& path, const ArchiveWindow& window) : path_(path) {
  if (window.whole()) {
    // IoError when missing, unreadable or not a regular file (stat first: a FIFO never blocks it)
    const auto kind = detect_file_kind(path);
    if (kind != FileKind::TorchSave) throw FormatError(not_torch_save(path, kind));
  }
  auto file = std::make_shared<const ZipFile>(path, window);
  if (!window.whole() && (file->size() < 4 || file->read(0, 4) != "PK\x03\x04"))
    damaged_zip(path, "the " + std::to_string(window.length) + " bytes at " + std::to_string(window.offset) +
                          " are not a zip archive");
  check_zip_directory(*file, path);
  base_ = file->base();
  size_ = file->size();
  file_size_ = file->file_size();
  zip_ = zip_call("reading the zip archive " + in_quotes(path), [&] {
    return std::make_unique<caffe2::serialize::PyTorchStreamReader>(std::make_shared<ZipFileAdapter>(file));
  });
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
  auto index = index_torch_save(*root, in_quotes(path_), size);
  locate_storages(index);
  return index;
}

TorchSaveIndex TorchSaveReader::read_object_index(const std::string& fqn, const std::string& what) {
  auto [data, size] = zip_call("reading data.pkl of " + what, [&] { return zip_->getRecord("data.pkl"); });
  const auto root = pickle::unpickle(std::string_view(static_cast<const char*>(data.get()), size), what);
  TorchSaveIndex index;
  index_torch_object(*root, fqn, index, what, size);
  locate_storages(index);
  return index;
}

void TorchSaveReader::locate_storages(TorchSaveIndex& index) {
  index.file_size = file_size_;
  for (auto& [key, storage] : index.storages) {
    const auto name = "data/" + key;
    if (!zip_->hasRecord(name))
      throw FormatError("h5dcp: " + in_quotes(path_) + " has no record " + name + " for a storage its data.pkl names");
    storage.data_offset =
        zip_call("locating " + name + " in " + in_quotes(path_), [&] { return zip_->getRecordOffset(name); });
    const auto record =
        zip_call("sizing " + name + " in " + in_quotes(path_), [&] { return zip_->getRecordSize(name); });
    // The pickle reader checked that numel * element size fits in 64 bits.
    const auto bytes = static_cast<std::uint64_t>(storage.numel) * dtype_size(storage.dtype);
    if (bytes > record)
      throw FormatError("h5dcp: record " + name + " of " + in_quotes(path_) + " has " + std::to_string(record) +
                        " bytes, its storage needs " + std::to_string(bytes));
    if (storage.data_offset > size_ || bytes > size_ - storage.data_offset)
      throw FormatError("h5dcp: " + in_quotes(path_) + " is truncated: record " + name + " runs past the end of " +
                        (base_ == 0 && size_ == file_size_ ? "the file" : "its archive"));
    storage.data_offset += base_;  // where the bytes are in the file
  }
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

namespace {

// The archive's directory name: PyTorchStreamWriter's for an archive written
// through a function, as h5dcp's exports always were.
constexpr const char* kArchiveName = "archive";

// What PyTorchStreamWriter::writeEndOfFile adds after the records: the
// archive format version torch.load checks (LibTorch's
// kMinProducedFileFormatVersion, 3, for files with nothing but tensors and
// data.pkl) and a serialization id: 40 digits, here the archive's bytes and
// its combined CRC-32s, so that the same content gets the same id.
void write_trailing_records(ZipWriter& zip) {
  // As torch.save >= 2.1 writes: readers on big-endian hosts need it, older ones ignore it.
  zip.write_record("byteorder", "little", 6);
  zip.write_record("version", "3\n", 2);
  char id[41];
  std::snprintf(id, sizeof id, "%020llu%020llu", static_cast<unsigned long long>(zip.bytes_written()),
                static_cast<unsigned long long>(zip.combined_crc()));
  zip.write_record(".data/serialization_id", id, 40);
}

}  // namespace

TorchSaveWriter::TorchSaveWriter(const std::string& path) : path_(path), temp_path_(temporary_sibling(path)) {
  fd_ = FileDescriptor::open_or_invalid(temp_path_, O_WRONLY | O_CREAT | O_EXCL, 0666);
  if (!fd_) throw IoError("h5dcp: creating " + in_quotes(temp_path_) + " failed: " + std::strerror(errno));
  zip_ = std::make_unique<ZipWriter>(fd_.get(), temp_path_, kArchiveName);
}

TorchSaveWriter::~TorchSaveWriter() {
  if (committed_) return;
  fd_.close_quietly();
  remove_quietly(temp_path_);
}

void TorchSaveWriter::write_record(const std::string& name, const void* data, std::size_t size) {
  zip_->write_record(name, data, size);
}

void TorchSaveWriter::begin_record(const std::string& name, std::uint64_t size) { zip_->begin_record(name, size); }

void TorchSaveWriter::append_record(const void* data, std::size_t size) { zip_->append(data, size); }

void TorchSaveWriter::end_record() { zip_->end_record(); }

void TorchSaveWriter::commit() {
  write_trailing_records(*zip_);
  zip_->finish();
  if (::fsync(fd_.get()) != 0)
    throw IoError("h5dcp: fsync of " + in_quotes(temp_path_) + " failed: " + std::strerror(errno));
  fd_.close(temp_path_);  // throws "h5dcp: closing '<temp>' failed: ..."
  publish_by_rename(temp_path_, path_);
  committed_ = true;
}

std::uint64_t append_torch_save_archive(int fd, const std::string& path, const std::vector<ArchiveRecord>& records) {
  ZipWriter zip(fd, path, kArchiveName);
  for (const auto& record : records) zip.write_record(record.name, record.data, record.size);
  write_trailing_records(zip);
  return zip.finish();
}

}  // namespace h5dcp::detail
