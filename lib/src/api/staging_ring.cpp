#include "api/staging_ring.hpp"

#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

constexpr std::int64_t kAlignment = 64;

std::int64_t aligned(std::int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

std::optional<std::int64_t> StagingRing::place(std::int64_t need) const {
  if (live_.empty()) return 0;
  const auto front = live_.front().first;
  const auto end = live_.back().first + live_.back().second;
  if (end > front) {
    // Not wrapped: room after the newest piece, else from the start up to the oldest.
    if (end + need <= capacity_) return end;
    if (need <= front) return 0;
  } else if (end + need <= front) {
    return end;  // wrapped: room between the newest and the oldest
  }
  return std::nullopt;
}

std::optional<std::int64_t> StagingRing::reserve(std::int64_t bytes) {
  const auto need = aligned(bytes);
  if (need > capacity_) throw UsageError("h5dcp: a staging piece is larger than the staging memory");
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    if (aborted_) return std::nullopt;
    if (const auto offset = place(need)) {
      live_.emplace_back(*offset, need);
      return offset;
    }
    released_.wait(lock);
  }
}

std::optional<std::int64_t> StagingRing::try_reserve(std::int64_t bytes) {
  const auto need = aligned(bytes);
  if (need > capacity_) throw UsageError("h5dcp: a staging piece is larger than the staging memory");
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_) return std::nullopt;
  const auto offset = place(need);
  if (offset) live_.emplace_back(*offset, need);
  return offset;
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
