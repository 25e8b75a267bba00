// plan/pack_runs: which elements of a pack one read takes.

#include <gtest/gtest.h>

#include <cstddef>

#include "plan/pack_runs.hpp"

namespace h5dcp::detail {
namespace {

void expect_run(ElementRange run, std::int64_t first, std::int64_t count) {
  EXPECT_EQ(run.first, first);
  EXPECT_EQ(run.count, count);
}

TEST(PackRuns, AdjacentAnnouncedRangesAreReadAsOneRun) {
  std::vector<ElementRange> announced{{20, 10}, {0, 10}, {10, 10}, {30, 5}};
  sort_ranges(announced);
  expect_run(pack_run(announced, {0, 10}, 0, 1000), 0, 35);
  // From the middle: only what follows is joined.
  expect_run(pack_run(announced, {20, 10}, 0, 1000), 20, 15);
}

TEST(PackRuns, AGapUpToTheLimitIsReadAndALargerOneEndsTheRun) {
  std::vector<ElementRange> announced{{0, 10}, {14, 6}, {40, 10}};
  sort_ranges(announced);
  expect_run(pack_run(announced, {0, 10}, 4, 1000), 0, 20);   // the gap of 4 read
  expect_run(pack_run(announced, {0, 10}, 3, 1000), 0, 10);   // a gap of 4 is too large
  expect_run(pack_run(announced, {0, 10}, 20, 1000), 0, 50);  // both gaps read
}

TEST(PackRuns, TheRunStaysWithinItsSizeButNeverBelowTheRequest) {
  std::vector<ElementRange> announced{{0, 10}, {10, 10}, {20, 10}};
  expect_run(pack_run(announced, {0, 10}, 0, 25), 0, 20);  // the third range would pass 25
  expect_run(pack_run(announced, {0, 10}, 0, 5), 0, 10);   // the request itself, whatever the size
}

TEST(PackRuns, NothingAnnouncedReadsTheRequestAlone) {
  expect_run(pack_run({}, {7, 3}, 100, 1000), 7, 3);
  // Announced ranges before the request are not read.
  expect_run(pack_run({{0, 5}}, {7, 3}, 100, 1000), 7, 3);
}

TEST(PackRuns, OverlappingAndContainedRangesDoNotShortenTheRun) {
  // A resharded load announces parts of a tensor; a verified read asks for the whole one.
  std::vector<ElementRange> announced{{0, 4}, {2, 2}, {4, 12}, {8, 2}};
  sort_ranges(announced);
  expect_run(pack_run(announced, {0, 16}, 0, 1000), 0, 16);
  expect_run(pack_run(announced, {0, 4}, 0, 1000), 0, 16);
}

// Place k for the ranges of the tests below: 64 bytes apart (never written).
char* place(int k) {
  static char bytes[8 * 64];
  return bytes + std::ptrdiff_t{64} * k;
}

TEST(PackRuns, ARunWhoseRangesHavePlacesIsReadStraightIntoThemWithItsGaps) {
  std::vector<ElementRange> announced{{10, 5, place(1)}, {0, 10, place(0)}, {18, 2, place(2)}};
  sort_ranges(announced);
  const auto run = pack_run(announced, {0, 10}, 4, 1000);
  expect_run(run, 0, 20);
  const auto pieces = scatter_pieces(announced, run, 1);
  ASSERT_EQ(pieces.size(), 4U);
  expect_run(pieces[0], 0, 10);
  EXPECT_EQ(pieces[0].into, place(0));
  expect_run(pieces[1], 10, 5);
  EXPECT_EQ(pieces[1].into, place(1));
  expect_run(pieces[2], 15, 3);  // the gap: read, into no place of a tensor
  EXPECT_EQ(pieces[2].into, nullptr);
  expect_run(pieces[3], 18, 2);
  EXPECT_EQ(pieces[3].into, place(2));
}

TEST(PackRuns, WithoutAPlaceForEveryRangeOrWithOverlapsTheRunIsBuffered) {
  // One range without a place.
  std::vector<ElementRange> unplaced{{0, 10, place(0)}, {10, 10}};
  EXPECT_TRUE(scatter_pieces(unplaced, {0, 20}, 1).empty());
  // One tensor into two places.
  std::vector<ElementRange> twice{{0, 10, place(0)}, {0, 10, place(1)}};
  sort_ranges(twice);
  EXPECT_TRUE(scatter_pieces(twice, {0, 10}, 1).empty());
  // Parts of one tensor that overlap.
  std::vector<ElementRange> overlapping{{0, 6, place(0)}, {4, 6, place(1)}};
  EXPECT_TRUE(scatter_pieces(overlapping, {0, 10}, 1).empty());
  // A range that sticks out of the run (the run stopped at its size).
  std::vector<ElementRange> long_one{{0, 10, place(0)}, {10, 10, place(1)}};
  EXPECT_TRUE(scatter_pieces(long_one, {0, 15}, 1).empty());
  EXPECT_EQ(scatter_pieces(long_one, {0, 20}, 1).size(), 2U);
  // Two places that share memory (tied tensors), and the same places apart.
  std::vector<ElementRange> tied{{0, 4, place(0)}, {4, 4, place(0) + 2}};
  EXPECT_TRUE(scatter_pieces(tied, {0, 8}, 1).empty());
  std::vector<ElementRange> apart{{0, 2, place(0)}, {2, 2, place(0) + 2}};
  EXPECT_EQ(scatter_pieces(apart, {0, 4}, 1).size(), 2U);
  // The places' extents count in bytes: 4 elements of 4 bytes reach place(0) + 16.
  std::vector<ElementRange> wide{{0, 4, place(0)}, {4, 4, place(0) + 8}};
  EXPECT_TRUE(scatter_pieces(wide, {0, 8}, 4).empty());
  // A run that does not start at an announced range.
  std::vector<ElementRange> later{{5, 5, place(0)}};
  EXPECT_TRUE(scatter_pieces(later, {0, 10}, 1).empty());
}

}  // namespace
}  // namespace h5dcp::detail
