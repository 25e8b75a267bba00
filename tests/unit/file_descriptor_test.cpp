// FileDescriptor: one owner per descriptor, close() that reports, a
// destructor that never throws, and moves that hand ownership over.

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "h5dcp/error.hpp"
#include "storage/file_descriptor.hpp"

namespace h5dcp::detail {
namespace {

// Whether `fd` is an open descriptor of this process.
bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

std::string temp_file() {
  std::string path = ::testing::TempDir() + "h5dcp_fd_XXXXXX";
  const int fd = ::mkstemp(path.data());
  EXPECT_GE(fd, 0);
  ::close(fd);
  return path;
}

TEST(FileDescriptor, OpensWithCloseOnExecAndClosesWhenItDies) {
  const auto path = temp_file();
  int raw = -1;
  {
    auto fd = FileDescriptor::open(path, O_RDONLY);
    ASSERT_TRUE(fd.valid());
    raw = fd.get();
    EXPECT_TRUE(is_open(raw));
    EXPECT_NE(::fcntl(raw, F_GETFD) & FD_CLOEXEC, 0);
  }
  EXPECT_FALSE(is_open(raw));
  ::unlink(path.c_str());
}

TEST(FileDescriptor, OpenThrowsIoErrorNamingThePath) {
  const std::string missing = ::testing::TempDir() + "h5dcp_fd_no_such_file";
  try {
    (void)FileDescriptor::open(missing, O_RDONLY);
    FAIL() << "opening a missing file did not throw";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("opening '" + missing + "' failed: No such file"), std::string::npos)
        << e.what();
  }
  const auto invalid = FileDescriptor::open_or_invalid(missing, O_RDONLY);
  EXPECT_FALSE(invalid.valid());
  EXPECT_EQ(errno, ENOENT);
}

TEST(FileDescriptor, CloseReportsAFailedCloseAndTheDestructorDoesNot) {
  // A number that is no open descriptor: close(2) fails with EBADF.
  const int not_open = 1000000;
  ASSERT_FALSE(is_open(not_open));
  FileDescriptor fd(not_open);
  try {
    fd.close("the/file");
    FAIL() << "a failed close(2) did not throw";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("closing 'the/file' failed: Bad file descriptor"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fd.valid());  // gone either way: never closed twice
  EXPECT_NO_THROW(fd.close("the/file"));
  EXPECT_NO_THROW({ FileDescriptor quiet(not_open); });  // the destructor swallows EBADF
  FileDescriptor again(not_open);
  EXPECT_EQ(again.close_quietly(), EBADF);
}

TEST(FileDescriptor, MovesHandOwnershipOverAndReleaseGivesItUp) {
  const auto path = temp_file();
  auto a = FileDescriptor::open(path, O_RDONLY);
  const int raw = a.get();
  FileDescriptor b(std::move(a));
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(b.get(), raw);
  auto c = FileDescriptor::open(path, O_RDONLY);
  const int replaced = c.get();
  c = std::move(b);  // closes what c held
  EXPECT_EQ(c.get(), raw);
  EXPECT_FALSE(is_open(replaced));
  const int released = c.release();
  EXPECT_FALSE(c.valid());
  EXPECT_TRUE(is_open(released));  // no longer owned: still open
  ::close(released);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace h5dcp::detail
