#include "formats/zip_writer.hpp"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "base/byte_codec.hpp"
#include "h5dcp/error.hpp"
#include "storage/durable_file.hpp"

namespace h5dcp::detail {
namespace {

// The zip format's fixed parts (APPNOTE.TXT 6.3: 4.3.7, 4.3.12, 4.3.14-16, 4.5.3).
constexpr std::uint32_t kLocalHeader = 0x04034b50;
constexpr std::uint32_t kCentralHeader = 0x02014b50;
constexpr std::uint32_t kZip64End = 0x06064b50;
constexpr std::uint32_t kZip64Locator = 0x07064b50;
constexpr std::uint32_t kEnd = 0x06054b50;
constexpr std::uint16_t kVersionZip64 = 45;                  // 4.4.3.2: the version that reads ZIP64
constexpr std::uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01, the earliest DOS date
constexpr std::uint16_t kZip64Extra = 0x0001;
constexpr std::uint16_t kPaddingExtra = 0x4246;  // "FB": the id PyTorchStreamWriter pads with
constexpr std::uint32_t kMax32 = 0xffffffff;
constexpr std::uint64_t kAlignment = 64;  // PyTorchStreamWriter's: tensors can be mmapped aligned
constexpr std::size_t kLocalFixed = 30;
constexpr std::size_t kCrcAt = 14;  // the CRC-32's offset in a local header
constexpr std::size_t kLocalZip64Extra = 4 + 16;
constexpr std::size_t kPaddingHeader = 4;

std::uint32_t crc32_of(std::uint32_t crc, const void* data, std::size_t size) {
  return static_cast<std::uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), size));
}

std::uint32_t clip32(std::uint64_t value) { return value >= kMax32 ? kMax32 : static_cast<std::uint32_t>(value); }

// The fields a local header and a central directory header share (4.3.7,
// 4.3.12), from the version needed to extract to the extra field's length.
void put_shared_fields(ByteWriter& w, std::uint32_t crc, std::size_t name_size, std::size_t extra_size) {
  w.put<std::uint16_t>(kVersionZip64);
  w.put<std::uint16_t>(0);  // flags: sizes in this header, names plain ASCII
  w.put<std::uint16_t>(0);  // stored
  w.put<std::uint16_t>(0);  // time
  w.put<std::uint16_t>(kDosDate);
  w.put<std::uint32_t>(crc);
  w.put<std::uint32_t>(kMax32);  // sizes: in the ZIP64 extra field
  w.put<std::uint32_t>(kMax32);
  w.put<std::uint16_t>(static_cast<std::uint16_t>(name_size));
  w.put<std::uint16_t>(static_cast<std::uint16_t>(extra_size));
}

}  // namespace

ZipWriter::ZipWriter(int fd, std::string path, std::string archive_name)
    : fd_(fd), path_(std::move(path)), prefix_(std::move(archive_name) + "/") {
  const auto at = ::lseek(fd_, 0, SEEK_CUR);
  if (at < 0) throw IoError("h5dcp: seeking in '" + path_ + "' failed: " + std::strerror(errno));
  start_ = static_cast<std::uint64_t>(at);
}

void ZipWriter::write(const void* data, std::size_t size) {
  if (const int error = write_fully(fd_, data, size))
    throw IoError("h5dcp: writing '" + path_ + "' failed: " + std::strerror(error));
  offset_ += size;
}

void ZipWriter::begin_record(const std::string& name, std::uint64_t size) {
  if (open_) throw UsageError("h5dcp: zip record " + entries_.back().name + " was not ended");
  const auto full = prefix_ + name;
  if (full.size() > 0xffff) throw UsageError("h5dcp: zip record name too long: " + name);
  // Padding so that the record's bytes start on a multiple of kAlignment.
  const auto unpadded = offset_ + kLocalFixed + full.size() + kLocalZip64Extra + kPaddingHeader;
  const auto padding = static_cast<std::uint16_t>((kAlignment - unpadded % kAlignment) % kAlignment);

  ByteWriter w;
  w.put<std::uint32_t>(kLocalHeader);
  // The CRC-32 is 0 until end_record writes it.
  put_shared_fields(w, 0, full.size(), kLocalZip64Extra + kPaddingHeader + padding);
  auto header = w.take();
  header += full;
  ByteWriter extra;
  extra.put<std::uint16_t>(kZip64Extra);
  extra.put<std::uint16_t>(16);
  extra.put<std::uint64_t>(size);  // uncompressed
  extra.put<std::uint64_t>(size);  // compressed: the same, stored
  extra.put<std::uint16_t>(kPaddingExtra);
  extra.put<std::uint16_t>(padding);
  header += extra.take();
  header.append(padding, 'Z');

  entries_.push_back(Entry{name, offset_, size, 0});
  write(header.data(), header.size());
  open_ = true;
  written_ = 0;
}

void ZipWriter::append(const void* data, std::size_t size) {
  if (!open_) throw UsageError("h5dcp: zip bytes outside a record");
  auto& entry = entries_.back();
  if (size > entry.size - written_)
    throw UsageError("h5dcp: zip record " + entry.name + " given more than its " + std::to_string(entry.size) +
                     " bytes");
  entry.crc = crc32_of(entry.crc, data, size);
  write(data, size);
  written_ += size;
}

void ZipWriter::end_record() {
  if (!open_) throw UsageError("h5dcp: no zip record to end");
  const auto& entry = entries_.back();
  if (written_ != entry.size)
    throw UsageError("h5dcp: zip record " + entry.name + " got " + std::to_string(written_) + " of its " +
                     std::to_string(entry.size) + " bytes");
  ByteWriter w;
  w.put<std::uint32_t>(entry.crc);
  const auto crc = w.take();
  if (const int error = pwrite_fully(fd_, crc.data(), crc.size(), start_ + entry.header_offset + kCrcAt))
    throw IoError("h5dcp: writing '" + path_ + "' failed: " + std::strerror(error));
  // As PyTorchStreamWriter combines them (c10::hash_combine), for the serialization id.
  combined_crc_ ^= entry.crc + 0x9e3779b9 + (combined_crc_ << 6) + (combined_crc_ >> 2);
  open_ = false;
}

void ZipWriter::write_record(const std::string& name, const void* data, std::size_t size) {
  begin_record(name, size);
  append(data, size);
  end_record();
}

std::uint64_t ZipWriter::finish() {
  if (open_) throw UsageError("h5dcp: zip record " + entries_.back().name + " was not ended");
  const auto directory_offset = offset_;
  Bytes directory;
  for (const auto& entry : entries_) {
    const auto full = prefix_ + entry.name;
    ByteWriter w;
    w.put<std::uint32_t>(kCentralHeader);
    w.put<std::uint16_t>(kVersionZip64);                   // made by
    put_shared_fields(w, entry.crc, full.size(), 4 + 24);  // the extra field: ZIP64's
    w.put<std::uint16_t>(0);                               // comment
    w.put<std::uint16_t>(0);                               // disk
    w.put<std::uint16_t>(0);                               // internal attributes
    w.put<std::uint32_t>(0);                               // external attributes
    w.put<std::uint32_t>(kMax32);                          // the local header's offset: in the ZIP64 extra field
    auto part = w.take();
    part += full;
    ByteWriter extra;
    extra.put<std::uint16_t>(kZip64Extra);
    extra.put<std::uint16_t>(24);
    extra.put<std::uint64_t>(entry.size);
    extra.put<std::uint64_t>(entry.size);
    extra.put<std::uint64_t>(entry.header_offset);
    part += extra.take();
    directory += part;
  }
  const auto directory_size = static_cast<std::uint64_t>(directory.size());
  const auto zip64_end_offset = directory_offset + directory_size;
  const auto count = static_cast<std::uint64_t>(entries_.size());
  ByteWriter end;
  end.put<std::uint32_t>(kZip64End);
  end.put<std::uint64_t>(44);  // the record's size after this field
  end.put<std::uint16_t>(kVersionZip64);
  end.put<std::uint16_t>(kVersionZip64);
  end.put<std::uint32_t>(0);
  end.put<std::uint32_t>(0);
  end.put<std::uint64_t>(count);
  end.put<std::uint64_t>(count);
  end.put<std::uint64_t>(directory_size);
  end.put<std::uint64_t>(directory_offset);
  end.put<std::uint32_t>(kZip64Locator);
  end.put<std::uint32_t>(0);
  end.put<std::uint64_t>(zip64_end_offset);
  end.put<std::uint32_t>(1);  // disks
  end.put<std::uint32_t>(kEnd);
  end.put<std::uint16_t>(0);
  end.put<std::uint16_t>(0);
  end.put<std::uint16_t>(count >= 0xffff ? 0xffff : static_cast<std::uint16_t>(count));
  end.put<std::uint16_t>(count >= 0xffff ? 0xffff : static_cast<std::uint16_t>(count));
  end.put<std::uint32_t>(clip32(directory_size));
  end.put<std::uint32_t>(clip32(directory_offset));
  end.put<std::uint16_t>(0);  // comment
  directory += end.take();
  write(directory.data(), directory.size());
  return offset_;
}

}  // namespace h5dcp::detail
