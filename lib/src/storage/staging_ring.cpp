#include "storage/staging_ring.hpp"

#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

constexpr std::int64_t kAlignment = 64;

std::int64_t aligned(std::int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

std::optional<std::int64_t> StagingRing::reserve(std::int64_t bytes) {
  const auto need = aligned(bytes);
  if (need > capacity_) throw UsageError("h5dcp: a staging piece is larger than the staging memory");
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (aborted_) return std::nullopt;
    std::optional<std::int64_t> offset;
    if (live_.empty()) {
      offset = 0;
    } else {
      const auto front = live_.front().first;
      const auto end = live_.back().first + live_.back().second;
      if (end > front) {
        // Not wrapped: room after the newest piece, else from the start up to the oldest.
        if (end + need <= capacity_)
          offset = end;
        else if (need <= front)
          offset = 0;
      } else if (end + need <= front) {
        offset = end;  // wrapped: room between the newest and the oldest
      }
    }
    if (offset) {
      live_.emplace_back(*offset, need);
      return offset;
    }
    released_.wait(lock);
  }
}

bool StagingRing::fits_at_once(const std::vector<std::int64_t>& sizes) const noexcept {
  std::int64_t total = 0;
  for (const auto bytes : sizes) {
    total += aligned(bytes);
    if (total > capacity_) return false;
  }
  return true;
}

void StagingRing::release_oldest() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!live_.empty()) live_.pop_front();
  }
  released_.notify_all();
}

void StagingRing::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }
  released_.notify_all();
}

void StagingRing::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  live_.clear();
  aborted_ = false;
}

}  // namespace h5dcp::detail
