// plan/pack_runs: which elements of a pack one read takes.

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace h5dcp::detail
