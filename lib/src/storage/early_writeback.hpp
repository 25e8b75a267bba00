#pragma once
// Starting the disk writes of a file while it is still being written.
//
// Data written into the page cache reaches the disk only at the final fsync,
// so a save is the copy into the page cache *plus* the disk write. Asking
// the kernel to start writing back what is there already, every few dozen
// MiB (sync_file_range(SYNC_FILE_RANGE_WRITE): it does not wait for the
// disk), overlaps the two: measured at 1 GiB on 2 ranks, saves went from
// 0.82-0.84 s to 0.56-0.63 s. The fsync at the end still makes the file
// durable; this is only a hint, and where the call does not exist or fails
// nothing changes. H5DCP_WRITEBACK_MIB sets the interval (default 32; 0
// turns it off).

#include <cstdint>
#include <string>

#include "storage/file_descriptor.hpp"

namespace h5dcp::detail {

class EarlyWriteback {
 public:
  /// For the file at `path` (opened lazily, read-only: the page cache is the
  /// file's, whichever descriptor asks).
  explicit EarlyWriteback(std::string path);
  ~EarlyWriteback();
  EarlyWriteback(EarlyWriteback&& other) noexcept;
  EarlyWriteback& operator=(EarlyWriteback&&) = delete;
  EarlyWriteback(const EarlyWriteback&) = delete;
  EarlyWriteback& operator=(const EarlyWriteback&) = delete;

  /// `bytes` more were written; once the interval is reached, starts the
  /// write-back of every dirty page of the file. Never throws.
  void written(std::int64_t bytes) noexcept;

  /// The interval from H5DCP_WRITEBACK_MIB, in bytes (0: off).
  static std::int64_t interval_from_environment() noexcept;

 private:
  std::string path_;
  std::int64_t interval_;
  std::int64_t pending_ = 0;
  FileDescriptor fd_;  // opened at the first interval
};

}  // namespace h5dcp::detail
