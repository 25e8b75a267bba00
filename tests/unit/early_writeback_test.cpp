// Early write-back is a hint: its interval comes from H5DCP_WRITEBACK_MIB,
// and nothing it meets (no file, a file it cannot use) is an error.

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "storage/early_writeback.hpp"

namespace h5dcp::detail {
namespace {

struct Variable {
  explicit Variable(const char* value) {
    if (value != nullptr)
      ::setenv("H5DCP_WRITEBACK_MIB", value, 1);
    else
      ::unsetenv("H5DCP_WRITEBACK_MIB");
  }
  ~Variable() { ::unsetenv("H5DCP_WRITEBACK_MIB"); }
};

std::int64_t interval_with(const char* value) {
  Variable variable(value);
  return EarlyWriteback::interval_from_environment();
}

TEST(EarlyWriteback, TheIntervalComesFromTheEnvironment) {
  constexpr std::int64_t kMiB = 1 << 20;
  EXPECT_EQ(interval_with(nullptr), 32 * kMiB);
  EXPECT_EQ(interval_with("0"), 0);
  EXPECT_EQ(interval_with("64"), 64 * kMiB);
  // Nonsense falls back to the default rather than turning anything off.
  EXPECT_EQ(interval_with("lots"), 32 * kMiB);
  EXPECT_EQ(interval_with("-3"), 32 * kMiB);
  EXPECT_EQ(interval_with("8x"), 32 * kMiB);
}

TEST(EarlyWriteback, AMissingFileIsNoError) {
  Variable every_mib("1");
  EarlyWriteback writeback("/nonexistent-h5dcp-dir/file.h5");
  for (int i = 0; i < 4; ++i) EXPECT_NO_THROW(writeback.written(3 << 20));
}

TEST(EarlyWriteback, AWrittenFileKeepsItsBytes) {
  Variable every_mib("1");
  char path[] = "/tmp/h5dcp-writeback-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string content(3 << 20, 'x');
  std::ofstream(path, std::ios::binary) << content;
  {
    EarlyWriteback writeback(path);
    EarlyWriteback moved(std::move(writeback));  // as the writer holding it is moved
    moved.written(static_cast<std::int64_t>(content.size()));
    moved.written(static_cast<std::int64_t>(content.size()));
  }
  std::ifstream in(path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), content);
  std::remove(path);
}

}  // namespace
}  // namespace h5dcp::detail
