#include "storage/read_ahead.hpp"

#include <fcntl.h>

#include <algorithm>
#include <utility>

#include "storage/size_knob.hpp"

namespace h5dcp::detail {

std::int64_t ReadAhead::window_from_environment() noexcept { return size_knob_bytes("H5DCP_READAHEAD_MIB", 64); }

ReadAhead::ReadAhead(std::string path, std::int64_t window_bytes) : path_(std::move(path)), window_(window_bytes) {}

void ReadAhead::will_read(std::int64_t offset, std::int64_t length) {
  if (window_ <= 0 || offset < 0 || length <= 0) return;
  // A range longer than the window the kernel reads well by itself: the
  // reader's one large read is sequential. Hinting it made 1 GiB cold loads
  // of 128 MiB blocks slower in h5dcp-bench; it stays in the stream, unhinted.
  // Ranges that follow each other (small tensors in their pack) are one:
  // a hint per tensor would cost more than the read.
  if (ranges_.size() > next_) {
    auto& last = ranges_.back();
    if (last.hinted && last.offset + last.length == offset && last.length + length <= std::min(window_, kPieceBytes)) {
      last.length += length;
      return;
    }
  }
  ranges_.push_back({offset, length, length <= window_});
}

void ReadAhead::read(std::int64_t bytes) noexcept {
  if (window_ <= 0) return;
  consumed_ += bytes;
  // What is read now the reader reads itself: hints start after it.
  hinted_ = std::max(hinted_, consumed_);
  const auto until = consumed_ + window_;
  while (hinted_ < until && next_ < ranges_.size()) {
    const auto& r = ranges_[next_];
    const auto within = hinted_ - next_start_;
    if (within >= r.length || !r.hinted) {
      hinted_ = std::max(hinted_, next_start_ + r.length);
      next_start_ += r.length;
      ++next_;
      continue;
    }
    if (!fd_) fd_ = FileDescriptor::open_or_invalid(path_, O_RDONLY);
    // Pieces, so that no one call queues much more than the window.
    const auto piece = std::min({r.length - within, until - hinted_, kPieceBytes});
    // The kernel reads the piece into the page cache in the background.
    if (!fd_ || ::posix_fadvise(fd_.get(), r.offset + within, piece, POSIX_FADV_WILLNEED) != 0) {
      window_ = 0;  // read as without hints
      return;
    }
    hinted_ += piece;
  }
}

}  // namespace h5dcp::detail
