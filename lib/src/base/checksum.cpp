#include "base/checksum.hpp"

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

std::uint64_t checksum(const void* data, std::size_t bytes) { return XXH3_64bits(data, bytes); }

SlabHasher::SlabHasher(std::vector<std::int64_t> slab_bytes) : slab_bytes_(std::move(slab_bytes)) {
  state_ = XXH3_createState();
  if (state_ == nullptr) throw Error("h5dcp: out of memory for a checksum state");
  XXH3_64bits_reset(state_);
  left_in_slab_ = slab_bytes_.empty() ? 0 : slab_bytes_.front();
}

SlabHasher::~SlabHasher() {
  if (state_ != nullptr) XXH3_freeState(state_);
}

SlabHasher::SlabHasher(SlabHasher&& other) noexcept
    : slab_bytes_(std::move(other.slab_bytes_)),
      digests_(std::move(other.digests_)),
      state_(other.state_),
      left_in_slab_(other.left_in_slab_) {
  other.state_ = nullptr;
}

void SlabHasher::update(const void* data, std::int64_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    if (digests_.size() == slab_bytes_.size()) throw Error("h5dcp: more bytes than the block's checksum slabs hold");
    const auto n = std::min(bytes, left_in_slab_);
    XXH3_64bits_update(state_, p, static_cast<std::size_t>(n));
    p += n;
    bytes -= n;
    left_in_slab_ -= n;
    if (left_in_slab_ == 0) {
      digests_.push_back(XXH3_64bits_digest(state_));
      XXH3_64bits_reset(state_);
      if (digests_.size() < slab_bytes_.size()) left_in_slab_ = slab_bytes_[digests_.size()];
    }
  }
}

std::vector<std::uint64_t> SlabHasher::digests() const {
  if (digests_.size() != slab_bytes_.size()) throw Error("h5dcp: a block was checksummed only in part");
  return digests_;
}

}  // namespace h5dcp::detail
