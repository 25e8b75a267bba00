#pragma once
// The zip container of torch.save files, written by h5dcp itself so that a
// record can be streamed. LibTorch's PyTorchStreamWriter takes each record
// as one buffer (miniz computes the CRC-32 before it writes the local
// header), so an export through it held the largest tensor whole. Here a
// record's local header is written first with its size, its bytes follow in
// pieces of any size, and its CRC-32 is written back into the header when
// the record ends.
//
// The layout is PyTorchStreamWriter's: stored (uncompressed) records named
// "<archive>/<name>", each record's bytes aligned to 64 bytes from the start
// of the archive by a padding extra field ("FB", as LibTorch's), and a ZIP64
// end of central directory. Every record carries ZIP64 sizes in its local
// header and ZIP64 sizes and offset in the central directory, whatever its
// size: a record or archive past 4 GiB takes the path that every small
// export takes, and that the tests read with torch.load, PyTorch's C++
// reader and Python's zipfile.

#include <cstdint>
#include <string>
#include <vector>

namespace h5dcp::detail {

class ZipWriter {
 public:
  /// An archive written at the current offset of `fd` (which the writer
  /// does not own), its records named "<archive_name>/<name>"; `path` names
  /// the file in errors. Offsets inside the archive count from where it
  /// starts, so it may be an item inside a larger file.
  ZipWriter(int fd, std::string path, std::string archive_name);

  /// Starts the record `name` of exactly `size` bytes. Throws IoError, or
  /// UsageError when a record is still open.
  void begin_record(const std::string& name, std::uint64_t size);
  /// The next `size` bytes of the open record. Throws IoError, or
  /// UsageError past the size begin_record gave.
  void append(const void* data, std::size_t size);
  /// Ends the open record: writes its CRC-32 into its local header. Throws
  /// IoError, or UsageError when fewer bytes came than announced.
  void end_record();
  /// begin_record, append and end_record of one buffer.
  void write_record(const std::string& name, const void* data, std::size_t size);

  /// Writes the central directory and the end records; returns the
  /// archive's length in bytes. The caller fsyncs. Throws IoError.
  std::uint64_t finish();

  /// The archive's bytes so far.
  std::uint64_t bytes_written() const noexcept { return offset_; }
  /// The CRC-32 of every record, combined (for a serialization id).
  std::uint64_t combined_crc() const noexcept { return combined_crc_; }

 private:
  struct Entry {
    std::string name;
    std::uint64_t header_offset = 0;  // from the archive's start
    std::uint64_t size = 0;
    std::uint32_t crc = 0;
  };

  void write(const void* data, std::size_t size);

  int fd_;
  std::string path_;
  std::string prefix_;        // "<archive>/"
  std::uint64_t start_ = 0;   // the archive's offset in the file
  std::uint64_t offset_ = 0;  // bytes written so far
  std::vector<Entry> entries_;
  bool open_ = false;
  std::uint64_t written_ = 0;  // bytes of the open record so far
  std::uint64_t combined_crc_ = 0;
};

}  // namespace h5dcp::detail
