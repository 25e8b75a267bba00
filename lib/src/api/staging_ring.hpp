#pragma once
// Offsets into a fixed staging buffer, handed out and given back in FIFO
// order (a ring): the caller's thread reserves room for the next piece, the
// background thread releases pieces once written. Thread-safe.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

namespace h5dcp::detail {

class StagingRing {
 public:
  explicit StagingRing(std::int64_t capacity) : capacity_(capacity) {}

  /// Room for `bytes` (at most the capacity), contiguous: blocks until the
  /// background has released enough. nullopt once abort() was called.
  std::optional<std::int64_t> reserve(std::int64_t bytes);
  /// The same without waiting: nullopt when there is no room now (or after
  /// abort()).
  std::optional<std::int64_t> try_reserve(std::int64_t bytes);
  /// Whether pieces of these sizes, reserved one after another, all fit at
  /// once (as reserve() lays them out, alignment included).
  bool fits_at_once(const std::vector<std::int64_t>& sizes) const noexcept;
  /// Gives back the oldest reservation.
  void release_oldest();
  /// Wakes and fails every reserve() until reset().
  void abort();
  /// Forgets every reservation (no save in flight).
  void reset();

  std::int64_t capacity() const noexcept { return capacity_; }

 private:
  std::optional<std::int64_t> place(std::int64_t need) const;  // under mutex_

  std::int64_t capacity_;
  std::mutex mutex_;
  std::condition_variable released_;
  std::deque<std::pair<std::int64_t, std::int64_t>> live_;  // offset, bytes; oldest first
  bool aborted_ = false;
};

}  // namespace h5dcp::detail
