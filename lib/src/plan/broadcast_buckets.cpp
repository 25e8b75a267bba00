#include "plan/broadcast_buckets.hpp"

#include <algorithm>
#include <map>

namespace h5dcp::detail {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<BucketItem>& items, std::size_t limit) {
  struct Open {
    std::vector<std::size_t> items;
    std::size_t bytes = 0;
  };
  std::vector<std::vector<std::size_t>> buckets;
  std::map<std::int32_t, Open> open;
  for (std::size_t i = 0; i < items.size(); ++i) {
    auto& bucket = open[items[i].key];
    // `bytes <= limit - bucket.bytes` cannot overflow: an open bucket never
    // holds more than `limit` unless it is a single item, which closes here.
    if (!bucket.items.empty() && (bucket.bytes > limit || items[i].bytes > limit - bucket.bytes)) {
      buckets.push_back(std::move(bucket.items));
      bucket = Open{};
    }
    bucket.items.push_back(i);
    bucket.bytes += items[i].bytes;
  }
  for (auto& [key, bucket] : open)
    if (!bucket.items.empty()) buckets.push_back(std::move(bucket.items));
  std::sort(buckets.begin(), buckets.end(), [](const auto& a, const auto& b) { return a.front() < b.front(); });
  return buckets;
}

}  // namespace h5dcp::detail
