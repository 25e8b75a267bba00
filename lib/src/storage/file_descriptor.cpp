#include "storage/file_descriptor.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

void throw_errno(const std::string& what, int error) {
  throw IoError("h5dcp: " + what + " failed: " + std::strerror(error));
}

std::size_t read_at(int fd, void* out, std::size_t size, std::uint64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < size) {
    const auto n = ::pread(fd, p + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("reading '" + path + "'", errno);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

std::size_t read_vector_at(int fd, std::vector<iovec>& pieces, std::uint64_t offset, const std::string& path) {
  std::size_t done = 0;
  std::size_t next = 0;  // the first piece not read to its end
  while (next < pieces.size()) {
    const auto count = static_cast<int>(std::min<std::size_t>(pieces.size() - next, IOV_MAX));
    const auto n = ::preadv(fd, pieces.data() + next, count, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("reading '" + path + "'", errno);
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
    next = consume_pieces(pieces, next, static_cast<std::size_t>(n));
  }
  return done;
}

std::size_t consume_pieces(std::span<iovec> pieces, std::size_t next, std::size_t n) noexcept {
  // Past the pieces done whole, into the one done in part.
  for (auto left = n; left > 0 && next < pieces.size();) {
    const auto take = std::min(left, pieces[next].iov_len);
    pieces[next].iov_base = static_cast<char*>(pieces[next].iov_base) + take;
    pieces[next].iov_len -= take;
    left -= take;
    if (pieces[next].iov_len == 0) ++next;
  }
  while (next < pieces.size() && pieces[next].iov_len == 0) ++next;
  return next;
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

namespace {

const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// realpath(3) of `path`, or nullopt when it does not resolve.
std::optional<std::string> resolved(const std::string& path) {
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(path.c_str(), nullptr), &std::free);
  if (!real) return std::nullopt;
  return std::string(real.get());
}

}  // namespace

FileDescriptor open_input_file(const std::string& path, const std::string& what) {
  auto fd = FileDescriptor::open_or_invalid(path, O_RDONLY | O_NONBLOCK);
  if (!fd) throw_errno("opening '" + path + "'", errno);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw_errno("reading '" + path + "'", errno);
  if (!S_ISREG(info.st_mode))
    throw FormatError("h5dcp: '" + path + "' is " + file_type_name(info.st_mode) + ", and " + what +
                      " must be a regular file (h5dcp reads no FIFO, device or directory)");
  // Reads of a regular file ignore O_NONBLOCK; cleared all the same.
  ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) & ~O_NONBLOCK);
  return fd;
}

void require_inside(const std::string& directory, const std::string& path, const std::string& what) {
  const auto real = resolved(path);
  const auto root = resolved(directory);
  if (!real || !root) return;
  const auto prefix = root->back() == '/' ? *root : *root + "/";
  if (real->compare(0, prefix.size(), prefix) == 0) return;
  throw FormatError("h5dcp: '" + path + "' (" + what + ") leads to '" + *real + "', outside the directory '" +
                    directory + "': h5dcp reads no file outside its input");
}

}  // namespace h5dcp::detail
