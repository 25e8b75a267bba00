#include "core/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>

#include "core/deferred_removal.hpp"
#include "core/fault_injection.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

std::pair<std::string, std::string> split_path(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

[[noreturn]] void throw_errno(const std::string& what, int error) {
  throw IoError("h5dcp: " + what + " failed: " + std::strerror(error));
}

}  // namespace

std::string temporary_sibling(const std::string& path) {
  const auto [dir, name] = split_path(path);
  if (name.empty()) throw UsageError("h5dcp: checkpoint path '" + path + "' names a directory, not a file");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) throw_errno("writing into the directory '" + dir + "'", errno);
  std::random_device entropy;
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%08x%08x", entropy(), entropy());
  return (dir == "." && path.find('/') == std::string::npos ? std::string() : dir + "/") + "." + name +
         std::string(kPartialMarker) + suffix;
}

int remove_partial_siblings(const std::string& path) noexcept {
  try {
    const auto [dir, name] = split_path(path);
    const std::string prefix = "." + name + std::string(kPartialMarker);
    int removed = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().filename().string().rfind(prefix, 0) != 0) continue;
      std::error_code ignored;
      removed += std::filesystem::remove(entry.path(), ignored) ? 1 : 0;
    }
    return removed;
  } catch (...) {
    return 0;
  }
}

void fsync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("opening '" + path + "' to fsync it", errno);
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0) throw_errno("fsync of '" + path + "'", error);
}

int write_fully(int fd, const void* data, std::size_t size) noexcept {
  bool short_writes = false;
  try {
    short_writes = short_write_requested("posix:write", -1);
  } catch (...) {
  }
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const auto n = ::write(fd, p, short_writes ? std::min<std::size_t>(size, 7) : size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

namespace {

// A second name for the large file at `path`, if there is one and the file
// system allows hard links; "" otherwise.
std::string retire(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_size < kBackgroundRemovalBytes) return {};
  auto retired = temporary_sibling(path);
  return ::link(path.c_str(), retired.c_str()) == 0 ? retired : std::string();
}

}  // namespace

void publish_by_rename(const std::string& from, const std::string& to) {
  const auto retired = retire(to);
  if (::rename(from.c_str(), to.c_str()) != 0) {
    const int error = errno;
    if (!retired.empty()) remove_quietly(retired);  // `to` still has its first name
    throw_errno("renaming '" + from + "' to '" + to + "'", error);
  }
  const auto dir = split_path(to).first;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno("opening the directory '" + dir + "' to fsync it", errno);
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  // Not durable yet: the replaced file keeps its second name, for the next
  // save to this path to remove, rather than being unlinked before the
  // rename is on disk.
  if (rc != 0) throw_errno("fsync of the directory '" + dir + "'", error);
  if (!retired.empty()) remove_in_background(retired);
}

void reserve_space(const std::string& path, std::int64_t bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("opening '" + path + "' to reserve space", errno);
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  ::close(fd);
  if (rc == 0 || rc == EOPNOTSUPP || rc == EINVAL) return;
  throw_errno("reserving " + std::to_string(bytes) + " bytes for '" + path + "'", rc);
}

void remove_quietly(const std::string& path) noexcept { ::unlink(path.c_str()); }

std::string utc_now_iso8601() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace h5dcp::detail
