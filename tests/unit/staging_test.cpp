#include <gtest/gtest.h>

#include <thread>

#include "api/staging_ring.hpp"
#include "h5dcp/error.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/staging_pieces.hpp"

namespace h5dcp::detail {
namespace {

std::int64_t total_volume(const std::vector<ChunkStorageMetadata>& pieces) {
  std::int64_t v = 0;
  for (const auto& p : pieces) v += volume(p.sizes);
  return v;
}

TEST(SplitBlock, AFittingBlockIsOnePiece) {
  const ChunkStorageMetadata box{{2, 3}, {4, 5}};
  const auto pieces = split_block(box, 4, 80);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0], box);
  EXPECT_TRUE(split_block({{0, 0}, {0, 5}}, 4, 80).empty());
}

TEST(SplitBlock, RowsAreCutIntoRunsThatFit) {
  // 10 rows of 6 float32 = 24 bytes per row; 100 bytes hold 4 rows.
  const auto pieces = split_block({{5, 0}, {10, 6}}, 4, 100);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0], (ChunkStorageMetadata{{5, 0}, {4, 6}}));
  EXPECT_EQ(pieces[1], (ChunkStorageMetadata{{9, 0}, {4, 6}}));
  EXPECT_EQ(pieces[2], (ChunkStorageMetadata{{13, 0}, {2, 6}}));
}

TEST(SplitBlock, RowsLargerThanTheLimitAreCutToo) {
  // 3 x 10 doubles: a row is 80 bytes, the limit 32: each row in runs of 4.
  const auto pieces = split_block({{0, 0}, {3, 10}}, 8, 32);
  EXPECT_EQ(pieces.size(), 9u);
  EXPECT_EQ(total_volume(pieces), 30);
  for (const auto& p : pieces) {
    EXPECT_EQ(p.sizes[0], 1);
    EXPECT_LE(p.sizes[1] * 8, 32);
  }
  EXPECT_EQ(pieces[3], (ChunkStorageMetadata{{1, 0}, {1, 4}}));
  EXPECT_THROW(split_block({{0}, {3}}, 8, 4), UsageError);
}

TEST(SplitBlock, ThreeDimensionsAndScalars) {
  const auto pieces = split_block({{1, 2, 3}, {2, 3, 4}}, 2, 16);  // 8 bytes per innermost row
  EXPECT_EQ(total_volume(pieces), 24);
  for (const auto& p : pieces) EXPECT_LE(volume(p.sizes) * 2, 16);
  EXPECT_EQ(split_block({{}, {}}, 8, 8).size(), 1u);
}

TEST(StagingRing, HandsOutRoomInOrderAndWrapsAround) {
  StagingRing ring(256);
  EXPECT_EQ(ring.reserve(100), 0);   // aligned to 128
  EXPECT_EQ(ring.reserve(64), 128);  // up to 192
  ring.release_oldest();             // frees [0, 128)
  EXPECT_EQ(ring.reserve(100), 0);   // 192 + 128 > 256: wraps to the start
  EXPECT_THROW(ring.reserve(300), UsageError);
}

TEST(StagingRing, FitsAtOnceCountsTheAlignmentReserveUses) {
  StagingRing ring(256);
  EXPECT_TRUE(ring.fits_at_once({}));
  EXPECT_TRUE(ring.fits_at_once({64, 64, 64, 64}));
  EXPECT_TRUE(ring.fits_at_once({256}));
  EXPECT_FALSE(ring.fits_at_once({257}));
  // 1 + 1 + 1 + 1 + 1 bytes are 5 aligned slots of 64: more than 256.
  EXPECT_TRUE(ring.fits_at_once({1, 1, 1, 1}));
  EXPECT_FALSE(ring.fits_at_once({1, 1, 1, 1, 1}));
  // What fits_at_once promises, reserve delivers without waiting.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(ring.reserve(1).has_value());
}

TEST(StagingRing, ReserveWaitsForARelease) {
  StagingRing ring(128);
  EXPECT_EQ(ring.reserve(128), 0);
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ring.release_oldest();
  });
  EXPECT_EQ(ring.reserve(64), 0);  // blocks until the release
  releaser.join();
  ring.abort();
  EXPECT_FALSE(ring.reserve(64).has_value());
  ring.reset();
  EXPECT_EQ(ring.reserve(64), 0);
}

TEST(StagingRing, TryReserveNeverWaits) {
  StagingRing ring(256);
  EXPECT_EQ(ring.try_reserve(64), 0);
  EXPECT_EQ(ring.try_reserve(128), 64);
  EXPECT_FALSE(ring.try_reserve(128).has_value());  // 64 free at the end, 0 at the start: no room now
  ring.release_oldest();                            // frees [0, 64)
  EXPECT_EQ(ring.try_reserve(64), 192);             // after the newest first, as reserve() lays out
  EXPECT_EQ(ring.try_reserve(64), 0);               // then wrapped, up to the oldest
  EXPECT_FALSE(ring.try_reserve(1).has_value());
  EXPECT_THROW(ring.try_reserve(257), UsageError);
  ring.abort();
  ring.release_oldest();
  EXPECT_FALSE(ring.try_reserve(1).has_value());  // aborted, though there is room
}

}  // namespace
}  // namespace h5dcp::detail
