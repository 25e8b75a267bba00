#pragma once
// A move-only owner of a POSIX file descriptor. close() reports a failed
// close(2) (for a file just written, a lost write shows up there) by
// throwing; the destructor closes quietly, because it runs on failure paths
// and during unwinding, where a second exception would terminate.

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace h5dcp::detail {

/// Throws IoError "h5dcp: <what> failed: <strerror(error)>".
[[noreturn]] void throw_errno(const std::string& what, int error);

class FileDescriptor {
 public:
  FileDescriptor() noexcept = default;
  /// Owns `fd` (a negative one owns nothing).
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  /// open(2) with O_CLOEXEC added; throws IoError naming `path` on failure.
  static FileDescriptor open(const std::string& path, int flags, unsigned mode = 0);
  /// open(2) with O_CLOEXEC added; owns nothing on failure (errno is set).
  static FileDescriptor open_or_invalid(const std::string& path, int flags, unsigned mode = 0) noexcept;

  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  /// Closes quietly (see the file comment).
  ~FileDescriptor() { close_quietly(); }

  int get() const noexcept { return fd_; }
  bool valid() const noexcept { return fd_ >= 0; }
  explicit operator bool() const noexcept { return valid(); }
  /// Gives up ownership without closing.
  int release() noexcept;

  /// Closes now; throws IoError naming `path` when close(2) fails (the
  /// descriptor is gone either way). No-op when it owns nothing.
  void close(const std::string& path);
  /// Closes now, ignoring failure; returns close(2)'s errno (0: fine).
  int close_quietly() noexcept;

 private:
  int fd_ = -1;
};

/// Reads up to `size` bytes at `offset` of `fd` (the file `path`) into
/// `out`, retrying interrupted and short reads; returns how many it read,
/// fewer only at the end of the file. Throws IoError "h5dcp: reading
/// '<path>' failed: <strerror>".
std::size_t read_at(int fd, void* out, std::size_t size, std::uint64_t offset, const std::string& path);

/// Reads consecutive bytes at `offset` of `fd` (the file `path`) into the
/// buffers `pieces` name, in order, as few preadv(2) calls as IOV_MAX
/// allows, retrying interrupted and short reads; returns how many bytes it
/// read, fewer only at the end of the file. `pieces` is consumed (its
/// entries advanced). Throws IoError like read_at.
std::size_t read_vector_at(int fd, std::vector<iovec>& pieces, std::uint64_t offset, const std::string& path);

/// After a preadv/pwritev of `pieces` from entry `next` moved `n` bytes:
/// advances the entries past those bytes and returns the first entry not
/// done to its end (pieces.size() when all are).
std::size_t consume_pieces(std::span<iovec> pieces, std::size_t next, std::size_t n) noexcept;

/// Opens the input file `path` for reading: with O_NONBLOCK, because open(2)
/// of a FIFO or a device would block forever, then checked with fstat to be
/// a regular file. `what` says what it is in messages ("a safetensors
/// file"). Throws IoError when it cannot be opened, FormatError when it is
/// not a regular file. Every reader of a source opens its files here.
FileDescriptor open_input_file(const std::string& path, const std::string& what);

/// Throws FormatError unless `path`, its symbolic links followed, is inside
/// `directory` (also resolved): a link inside a checkpoint may point within
/// it, never to a file outside, which h5dcp would copy into the output.
/// `what` as for open_input_file. A `path` that does not resolve is left to
/// the open that follows (IoError).
void require_inside(const std::string& directory, const std::string& path, const std::string& what);

}  // namespace h5dcp::detail
