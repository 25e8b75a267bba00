// Buckets of a broadcast: one type per bucket, never over the limit unless a
// single item is, every item exactly once, the same order on every rank.

#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "plan/broadcast_buckets.hpp"

namespace h5dcp::detail {
namespace {

using Buckets = std::vector<std::vector<std::size_t>>;

TEST(BroadcastBuckets, PacksItemsOfOneKeyUpToTheLimit) {
  // key 1 = 4-byte items, key 2 = 8-byte items, limit 8.
  const std::vector<BucketItem> items{{1, 4}, {2, 8}, {1, 4}, {1, 4}, {2, 8}};
  EXPECT_EQ(assign_buckets(items, 8), (Buckets{{0, 2}, {1}, {3}, {4}}));
  EXPECT_EQ(assign_buckets(items, 1000), (Buckets{{0, 2, 3}, {1, 4}}));
  EXPECT_TRUE(assign_buckets({}, 8).empty());
}

TEST(BroadcastBuckets, AnItemOverTheLimitTravelsAlone) {
  EXPECT_EQ(assign_buckets({{1, 4}, {1, 100}, {1, 4}, {1, 4}}, 8), (Buckets{{0}, {1}, {2, 3}}));
  // Limit 0: one item per bucket; empty items may share.
  EXPECT_EQ(assign_buckets({{1, 4}, {1, 4}, {3, 2}}, 0), (Buckets{{0}, {1}, {2}}));
  EXPECT_EQ(assign_buckets({{1, 0}, {1, 0}}, 0), (Buckets{{0, 1}}));
}

TEST(BroadcastBuckets, HugeSizesDoNotOverflow) {
  const auto max = std::numeric_limits<std::size_t>::max();
  EXPECT_EQ(assign_buckets({{1, max / 2 + 1}, {1, max / 2 + 1}}, max), (Buckets{{0}, {1}}));
  EXPECT_EQ(assign_buckets({{1, max}, {1, 1}}, 16), (Buckets{{0}, {1}}));
}

TEST(BroadcastBuckets, RandomListsKeepEveryRule) {
  std::mt19937 random(42);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BucketItem> items(random() % 40);
    for (auto& item : items) item = {static_cast<std::int32_t>(random() % 3), random() % 64};
    const std::size_t limit = random() % 100;
    const auto buckets = assign_buckets(items, limit);
    std::vector<int> seen(items.size(), 0);
    for (std::size_t b = 0; b < buckets.size(); ++b) {
      const auto& bucket = buckets[b];
      ASSERT_FALSE(bucket.empty());
      if (b > 0) {
        EXPECT_LT(buckets[b - 1].front(), bucket.front());
      }
      std::size_t bytes = 0;
      for (std::size_t i = 0; i < bucket.size(); ++i) {
        ++seen[bucket[i]];
        bytes += items[bucket[i]].bytes;
        EXPECT_EQ(items[bucket[i]].key, items[bucket.front()].key);
        if (i > 0) {
          EXPECT_LT(bucket[i - 1], bucket[i]);
        }
      }
      if (bucket.size() > 1) {
        EXPECT_LE(bytes, limit) << "trial " << trial;
      }
    }
    for (auto n : seen) EXPECT_EQ(n, 1);
  }
}

}  // namespace
}  // namespace h5dcp::detail
