#include "bench_posix_baseline.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <stdexcept>

namespace h5dcp_bench {
namespace {

constexpr std::int64_t kPiece = std::int64_t{16} << 20;

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw std::runtime_error(what + " '" + path + "': " + std::strerror(error));
}

// The benchmark's own descriptor, closed on every path out.
class Fd {
 public:
  Fd(const std::string& path, int flags) : fd_(::open(path.c_str(), flags, 0644)) {
    if (fd_ < 0) fail("open", path, errno);
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

void pwrite_all(int fd, const char* data, std::int64_t bytes, std::int64_t offset, const std::string& path) {
  while (bytes > 0) {
    const auto n = ::pwrite(fd, data, static_cast<std::size_t>(bytes), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("pwrite", path, n < 0 ? errno : EIO);
    data += n;
    bytes -= n;
    offset += n;
  }
}

void sync_or_fail(int fd, const std::string& path) {
  if (::fsync(fd) != 0) fail("fsync", path, errno);
}

}  // namespace

std::uint64_t posix_write(const std::string& path, const std::vector<FileRange>& ranges, std::int64_t writeback_bytes,
                          bool hash) {
  const Fd fd(path, O_WRONLY | O_CREAT);
  for (const auto& r : ranges) {
    if (r.bytes == 0) continue;
    const int rc = ::posix_fallocate(fd.get(), static_cast<off_t>(r.offset), static_cast<off_t>(r.bytes));
    if (rc != 0) fail("posix_fallocate", path, rc);
  }
  const std::int64_t piece = writeback_bytes > 0 ? writeback_bytes : kPiece;
  std::uint64_t checksums = 0;
  for (const auto& r : ranges) {
    for (std::int64_t done = 0; done < r.bytes; done += piece) {
      const auto n = std::min(piece, r.bytes - done);
      const char* data = static_cast<const char*>(r.data) + done;
      if (hash) checksums ^= XXH3_64bits(data, static_cast<std::size_t>(n));
      pwrite_all(fd.get(), data, n, r.offset + done, path);
      // Offset 0, length 0: the whole file, as h5dcp's early write-back asks.
      if (writeback_bytes > 0 && ::sync_file_range(fd.get(), 0, 0, SYNC_FILE_RANGE_WRITE) != 0)
        fail("sync_file_range", path, errno);
    }
  }
  sync_or_fail(fd.get(), path);
  return checksums;
}

void publish(const std::string& temporary, const std::string& final_path) {
  if (std::rename(temporary.c_str(), final_path.c_str()) != 0) fail("rename", temporary, errno);
  auto dir = std::filesystem::path(final_path).parent_path();
  if (dir.empty()) dir = ".";
  const Fd fd(dir.string(), O_RDONLY | O_DIRECTORY);
  sync_or_fail(fd.get(), dir.string());
}

void direct_write(const std::string& path, const std::vector<FileRange>& ranges) {
  constexpr std::size_t kAlign = 4096;
  const Fd fd(path, O_WRONLY | O_CREAT | O_DIRECT);
  void* raw = nullptr;
  if (::posix_memalign(&raw, kAlign, static_cast<std::size_t>(kPiece)) != 0) throw std::bad_alloc();
  const std::unique_ptr<char, decltype(&std::free)> buffer(static_cast<char*>(raw), &std::free);
  for (const auto& r : ranges) {
    if (r.offset % kAlign != 0 || r.bytes % kAlign != 0)
      throw std::runtime_error("direct_write: offsets and sizes must be multiples of 4096");
    for (std::int64_t done = 0; done < r.bytes; done += kPiece) {
      const auto n = std::min(kPiece, r.bytes - done);
      std::memcpy(buffer.get(), static_cast<const char*>(r.data) + done, static_cast<std::size_t>(n));
      pwrite_all(fd.get(), buffer.get(), n, r.offset + done, path);
    }
  }
  sync_or_fail(fd.get(), path);
}

std::uint64_t direct_write_packed(const std::string& path, const std::vector<FileRange>& ranges) {
  constexpr std::int64_t kAlign = 4096;
  constexpr std::int64_t kSlab = std::int64_t{1} << 20;
  if (ranges.empty()) return 0;
  const std::int64_t start = ranges.front().offset;
  if (start % kAlign != 0) throw std::runtime_error("direct_write_packed: the first offset must be a multiple of 4096");
  const Fd fd(path, O_WRONLY | O_CREAT | O_DIRECT);
  // The space reserved first, as h5dcp's writer and posix_write do (an
  // extending direct write would allocate as it goes).
  std::int64_t total = 0;
  for (const auto& r : ranges) total += r.bytes;
  if (total > 0) {
    const int rc = ::posix_fallocate(fd.get(), static_cast<off_t>(start),
                                     static_cast<off_t>((total + kAlign - 1) / kAlign * kAlign));
    if (rc != 0) fail("posix_fallocate", path, rc);
  }
  // Two buffers: one is written (a thread of its own) while the next fills,
  // so that the disk always has a write in flight from this rank.
  std::array<std::unique_ptr<char, decltype(&std::free)>, 2> buffers{
      std::unique_ptr<char, decltype(&std::free)>(nullptr, &std::free),
      std::unique_ptr<char, decltype(&std::free)>(nullptr, &std::free)};
  // On huge pages where the kernel gives them: a direct write's request
  // takes one segment per physically contiguous run of the buffer, and the
  // device caps the segments per request.
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  for (auto& b : buffers) {
    void* raw = nullptr;
    if (::posix_memalign(&raw, kHuge, static_cast<std::size_t>(kPiece)) != 0) throw std::bad_alloc();
    static_cast<void>(::madvise(raw, static_cast<std::size_t>(kPiece), MADV_HUGEPAGE));
    b.reset(static_cast<char*>(raw));
  }
  std::array<std::future<void>, 2> writing;
  const auto wait = [&](std::size_t i) {
    if (writing[i].valid()) writing[i].get();  // rethrows the write's error
  };
  std::size_t current = 0;
  std::uint64_t checksums = 0;
  std::int64_t filled = 0;   // bytes in the current buffer
  std::int64_t written = 0;  // bytes handed to the writes before them
  try {
    for (const auto& r : ranges) {
      if (r.offset != start + written + filled)
        throw std::runtime_error("direct_write_packed: the ranges must follow each other in the file");
      for (std::int64_t done = 0; done < r.bytes;) {
        const auto n = std::min({kSlab, r.bytes - done, kPiece - filled});
        char* to = buffers[current].get() + filled;
        std::memcpy(to, static_cast<const char*>(r.data) + done, static_cast<std::size_t>(n));
        checksums ^= XXH3_64bits(to, static_cast<std::size_t>(n));
        filled += n;
        done += n;
        if (filled == kPiece) {
          const char* full = buffers[current].get();
          const std::int64_t at = start + written;
          writing[current] =
              std::async(std::launch::async, [&fd, full, at, &path] { pwrite_all(fd.get(), full, kPiece, at, path); });
          written += filled;
          filled = 0;
          current ^= 1;
          wait(current);
        }
      }
    }
    if (filled > 0) {
      const auto padded = (filled + kAlign - 1) / kAlign * kAlign;
      std::memset(buffers[current].get() + filled, 0, static_cast<std::size_t>(padded - filled));
      pwrite_all(fd.get(), buffers[current].get(), padded, start + written, path);
    }
    wait(current ^ 1);
  } catch (...) {
    for (auto& w : writing)
      if (w.valid()) w.wait();  // no write left using a buffer about to be freed
    throw;
  }
  if (filled > 0 && ::ftruncate(fd.get(), static_cast<off_t>(start + written + filled)) != 0)
    fail("ftruncate", path, errno);
  sync_or_fail(fd.get(), path);
  return checksums;
}

namespace {

// Reads `ranges` of `path` 16 MiB at a time into one buffer (dd bs=16M),
// handing each piece to `piece(data, bytes, expected)`, `expected` being
// where the range's own bytes for it are (null for a range without them).
// `direct`: with O_DIRECT, past the page cache (dd iflag=direct).
// Throws std::runtime_error, also on a short file.
template <typename Piece>
void read_pieces(const std::string& path, const std::vector<FileRange>& ranges, Piece&& piece, bool direct = false) {
  constexpr std::size_t kAlign = 4096;
  const Fd fd(path, direct ? O_RDONLY | O_DIRECT : O_RDONLY);
  // Aligned either way: O_DIRECT needs it, and the buffered read then
  // differs from the direct one in the flag alone.
  void* raw = nullptr;
  if (::posix_memalign(&raw, kAlign, static_cast<std::size_t>(kPiece)) != 0) throw std::bad_alloc();
  const std::unique_ptr<char, decltype(&std::free)> buffer(static_cast<char*>(raw), &std::free);
  for (const auto& r : ranges) {
    if (direct && (r.offset % kAlign != 0 || r.bytes % kAlign != 0))
      throw std::runtime_error("direct_read: offsets and sizes must be multiples of 4096");
    for (std::int64_t done = 0; done < r.bytes;) {
      const auto want = std::min(kPiece, r.bytes - done);
      const auto n =
          ::pread(fd.get(), buffer.get(), static_cast<std::size_t>(want), static_cast<off_t>(r.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("pread", path, errno);
      if (n == 0) fail("pread (the file ends early)", path, EIO);
      // A read's ranges carry no bytes (data null): no offset taken from null.
      piece(buffer.get(), static_cast<std::size_t>(n),
            r.data != nullptr ? static_cast<const char*>(r.data) + done : nullptr);
      done += n;
    }
  }
}

}  // namespace

bool file_holds(const std::string& path, const std::vector<FileRange>& ranges) {
  bool same = true;
  try {
    read_pieces(path, ranges, [&](const char* data, std::size_t bytes, const char* expected) {
      same = same && expected != nullptr && std::memcmp(data, expected, bytes) == 0;
    });
  } catch (const std::runtime_error&) {
    return false;  // missing or short: not what was written
  }
  return same;
}

namespace {

// The bytes read_pieces reads, counted and dropped.
std::int64_t bytes_read(const std::string& path, const std::vector<FileRange>& ranges, bool direct) {
  std::int64_t total = 0;
  read_pieces(
      path, ranges, [&](const char*, std::size_t bytes, const char*) { total += static_cast<std::int64_t>(bytes); },
      direct);
  return total;
}

}  // namespace

std::int64_t posix_read(const std::string& path, const std::vector<FileRange>& ranges) {
  return bytes_read(path, ranges, /*direct=*/false);
}

std::int64_t direct_read(const std::string& path, const std::vector<FileRange>& ranges) {
  return bytes_read(path, ranges, /*direct=*/true);
}

}  // namespace h5dcp_bench
