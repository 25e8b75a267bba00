#pragma once
// Asking the kernel to read ahead the byte ranges a load will read.
//
// A rank's blocks of a checkpoint lie in the shared file one after another
// with the other ranks' blocks between them, so each read is, to the
// kernel's readahead, a jump that starts a small window anew. Knowing the
// ranges in read order (the load plan says them), posix_fadvise(WILLNEED)
// queues the next ones while the current one is read, keeping about a
// window of reads in flight on a cold page cache. A hint only: where it
// fails, or the file cannot be opened, nothing changes. H5DCP_READAHEAD_MIB
// sets the window (default 64; 0 turns it off).

#include <cstdint>
#include <string>
#include <vector>

#include "storage/file_descriptor.hpp"

namespace h5dcp::detail {

class ReadAhead {
 public:
  /// For the file at `path` (opened at the first hint, read-only: the page
  /// cache is the file's, whichever descriptor reads).
  explicit ReadAhead(std::string path, std::int64_t window_bytes = window_from_environment());

  /// The next range the reader will read, in read order (one longer than
  /// the window is passed over, unhinted). Never throws but std::bad_alloc.
  void will_read(std::int64_t offset, std::int64_t length);

  /// The reader is about to read the next `bytes` of the announced ranges
  /// (in order, as one stream): hints what follows them, up to a window's
  /// worth past their end. Never throws.
  void read(std::int64_t bytes) noexcept;

  /// The window from H5DCP_READAHEAD_MIB, in bytes (0: off).
  static std::int64_t window_from_environment() noexcept;

  /// How far into the stream of announced bytes hints reach (for tests).
  std::int64_t hinted() const noexcept { return hinted_; }

  /// How many ranges the announced ones became, after adjacent ones were
  /// joined (for tests).
  std::size_t ranges() const noexcept { return ranges_.size(); }

 private:
  struct Range {
    std::int64_t offset;
    std::int64_t length;
    bool hinted;  // not when longer than the window
  };
  std::string path_;
  std::int64_t window_;
  std::vector<Range> ranges_;
  static constexpr std::int64_t kPieceBytes = std::int64_t{16} << 20;
  std::size_t next_ = 0;         // the first range not hinted to its end
  std::int64_t next_start_ = 0;  // where it starts in the stream
  std::int64_t hinted_ = 0;      // stream position hints reach
  std::int64_t consumed_ = 0;    // stream position reads reach
  FileDescriptor fd_;
};

}  // namespace h5dcp::detail
