#include "storage/file_descriptor.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

void throw_errno(const std::string& what, int error) {
  throw IoError("h5dcp: " + what + " failed: " + std::strerror(error));
}

FileDescriptor FileDescriptor::open(const std::string& path, int flags, unsigned mode) {
  auto fd = open_or_invalid(path, flags, mode);
  if (!fd) throw_errno("opening '" + path + "'", errno);
  return fd;
}

FileDescriptor FileDescriptor::open_or_invalid(const std::string& path, int flags, unsigned mode) noexcept {
  return FileDescriptor(::open(path.c_str(), flags | O_CLOEXEC, static_cast<mode_t>(mode)));
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    close_quietly();
    fd_ = other.release();
  }
  return *this;
}

int FileDescriptor::release() noexcept {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void FileDescriptor::close(const std::string& path) {
  if (const int error = close_quietly(); error != 0) throw_errno("closing '" + path + "'", error);
}

int FileDescriptor::close_quietly() noexcept {
  if (fd_ < 0) return 0;
  // POSIX leaves the descriptor's state after an EINTR unspecified; on Linux
  // it is closed either way, so close(2) is never retried.
  const int result = ::close(release());
  return result == 0 ? 0 : errno;
}

}  // namespace h5dcp::detail
