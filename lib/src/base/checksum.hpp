#pragma once
// Checksums of stored data: XXH3-64 over consecutive byte ranges ("slabs")
// of a block, computed while the data is in memory for writing, never by
// reading the file back.

#include <cstdint>
#include <vector>

#include <xxhash.h>

namespace h5dcp::detail {

/// The name stored in the file.
inline constexpr const char* kChecksumAlgorithm = "xxh3-64";

std::uint64_t checksum(const void* data, std::size_t bytes);

/// Digests of consecutive slabs of one block, fed in order, in pieces of any
/// size (a piece may span slab boundaries).
class SlabHasher {
 public:
  explicit SlabHasher(std::vector<std::int64_t> slab_bytes);
  ~SlabHasher();
  SlabHasher(const SlabHasher&) = delete;
  SlabHasher& operator=(const SlabHasher&) = delete;
  SlabHasher(SlabHasher&& other) noexcept;

  void update(const void* data, std::int64_t bytes);
  /// Every slab's digest; throws Error when not every byte was fed.
  std::vector<std::uint64_t> digests() const;

 private:
  std::vector<std::int64_t> slab_bytes_;
  std::vector<std::uint64_t> digests_;
  XXH3_state_t* state_ = nullptr;
  std::int64_t left_in_slab_ = 0;
};

}  // namespace h5dcp::detail
