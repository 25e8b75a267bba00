#include "storage/early_writeback.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "storage/size_knob.hpp"

namespace h5dcp::detail {

std::int64_t EarlyWriteback::interval_from_environment() noexcept { return size_knob_bytes("H5DCP_WRITEBACK_MIB", 32); }

EarlyWriteback::EarlyWriteback(std::string path) : path_(std::move(path)), interval_(interval_from_environment()) {}

EarlyWriteback::EarlyWriteback(EarlyWriteback&& other) noexcept
    : path_(std::move(other.path_)), interval_(other.interval_), pending_(other.pending_), fd_(std::move(other.fd_)) {}

EarlyWriteback::~EarlyWriteback() = default;

void EarlyWriteback::written(std::int64_t bytes) noexcept {
  if (interval_ <= 0) return;
  pending_ += bytes;
  if (pending_ < interval_) return;
  pending_ = 0;
  if (!fd_) fd_ = FileDescriptor::open_or_invalid(path_, O_RDONLY);
  if (!fd_) {
    interval_ = 0;  // cannot open it: give up quietly, the fsync still comes
    return;
  }
#ifdef SYNC_FILE_RANGE_WRITE
  // Offset 0, length 0: the whole file. Pages already on their way are skipped.
  if (::sync_file_range(fd_.get(), 0, 0, SYNC_FILE_RANGE_WRITE) != 0) interval_ = 0;
#else
  interval_ = 0;
#endif
}

}  // namespace h5dcp::detail
