// Read-ahead hints: the window comes from H5DCP_READAHEAD_MIB; hints cover
// the announced ranges after what is being read, up to a window ahead; a
// file that cannot be opened turns them off, and nothing is an error.

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "storage/read_ahead.hpp"

namespace h5dcp::detail {
namespace {

std::int64_t window_with(const char* value) {
  if (value != nullptr)
    ::setenv("H5DCP_READAHEAD_MIB", value, 1);
  else
    ::unsetenv("H5DCP_READAHEAD_MIB");
  const auto window = ReadAhead::window_from_environment();
  ::unsetenv("H5DCP_READAHEAD_MIB");
  return window;
}

TEST(ReadAhead, TheWindowComesFromTheEnvironment) {
  EXPECT_EQ(window_with(nullptr), std::int64_t{64} << 20);
  EXPECT_EQ(window_with(""), std::int64_t{64} << 20);
  EXPECT_EQ(window_with("0"), 0);
  EXPECT_EQ(window_with("8"), std::int64_t{8} << 20);
  EXPECT_EQ(window_with("-1"), std::int64_t{64} << 20);
  EXPECT_EQ(window_with("12x"), std::int64_t{64} << 20);
}

struct File {
  std::string path = "/tmp/h5dcp-read-ahead-" + std::to_string(::getpid());
  File() { std::ofstream(path) << std::string(1 << 20, 'x'); }
  ~File() { ::unlink(path.c_str()); }
};

TEST(ReadAhead, HintsFollowWhatIsReadUpToAWindow) {
  File file;
  ReadAhead ahead(file.path, 100'000);
  // One stream of ranges: [0, 50k) [50k, 150k) [150k, 190k) [190k, 490k) [490k, 500k).
  ahead.will_read(0, 50'000);
  ahead.will_read(500'000, 100'000);
  ahead.will_read(200'000, 40'000);
  ahead.will_read(300'000, 300'000);  // longer than the window: passed over, unhinted
  ahead.will_read(700'000, 10'000);
  ahead.will_read(-1, 10);  // not a range: ignored
  ahead.read(50'000);       // reading the first: the next 100k of the stream are hinted
  EXPECT_EQ(ahead.hinted(), 150'000);
  ahead.read(100'000);  // the second: the third is hinted, the long one passed over
  EXPECT_EQ(ahead.hinted(), 490'000);
  ahead.read(40'000);  // a window ahead is covered already
  EXPECT_EQ(ahead.hinted(), 490'000);
  ahead.read(300'000);  // the long one: the last follows it
  EXPECT_EQ(ahead.hinted(), 500'000);
}

TEST(ReadAhead, AdjacentRangesAreOneHintUpToAWindow) {
  File file;
  ReadAhead ahead(file.path, 100'000);
  ahead.will_read(0, 40'000);
  ahead.will_read(40'000, 40'000);  // follows the first: joined
  EXPECT_EQ(ahead.ranges(), 1u);
  ahead.will_read(80'000, 40'000);  // would make 120k, past the window: a range of its own
  EXPECT_EQ(ahead.ranges(), 2u);
  ahead.will_read(130'000, 10'000);  // a gap: its own
  EXPECT_EQ(ahead.ranges(), 3u);
  ahead.read(80'000);  // the joined range read: hints reach a window past it, into the last
  EXPECT_EQ(ahead.hinted(), 130'000);
  ahead.read(40'000);
  EXPECT_EQ(ahead.hinted(), 130'000);
  // The last range is hinted to its end: one announced after it is not
  // joined to it (the hints have passed it), and is still hinted.
  ahead.read(5'000);
  EXPECT_EQ(ahead.hinted(), 130'000);
  ahead.will_read(140'000, 10'000);
  EXPECT_EQ(ahead.ranges(), 4u);
  ahead.read(5'000);
  EXPECT_EQ(ahead.hinted(), 140'000);
}

TEST(ReadAhead, OffOrWithoutAFileNothingIsHinted) {
  ReadAhead off("/nonexistent/h5dcp", 0);
  off.will_read(0, 10);
  off.read(5);
  EXPECT_EQ(off.hinted(), 0);
  ReadAhead missing("/nonexistent/h5dcp", 1 << 20);
  missing.will_read(0, 10);
  missing.will_read(10, 10);
  missing.read(10);  // opening fails: hints end, quietly
  missing.read(10);
  EXPECT_EQ(missing.hinted(), 10);
}

}  // namespace
}  // namespace h5dcp::detail
