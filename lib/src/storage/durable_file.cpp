#include "storage/durable_file.hpp"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <vector>

#include "base/fault_injection.hpp"
#include "h5dcp/error.hpp"
#include "storage/deferred_removal.hpp"
#include "storage/file_descriptor.hpp"

namespace h5dcp::detail {
namespace {

// Whether fault injection asks for short writes ("posix:write@*!short").
bool short_writes_requested() noexcept {
  try {
    return short_write_requested("posix:write", -1);
  } catch (...) {
    return false;
  }
}

}  // namespace

namespace {

std::pair<std::string, std::string> split_path(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// This machine's host name, with what is not [A-Za-z0-9._-] replaced by '_'
// so that it fits a file name ('.' is fine: names are parsed from the end).
std::string host_for_names() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "unknown-host";
  std::string host(name);
  for (auto& c : host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) c = '_';
  return host;
}

bool is_digits(std::string_view s) {
  return !s.empty() && s.size() <= 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_random_suffix(std::string_view s) {
  return s.size() == 16 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

std::string human_bytes(std::int64_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "%lld bytes (%.1f MiB)", static_cast<long long>(bytes),
                static_cast<double>(bytes) / (1 << 20));
  return text;
}

// Whether `pid` has exited but is not reaped yet: a zombie still answers
// kill(pid, 0), and the ranks of a job killed with its mpiexec stay zombies
// until init reaps them, which may be after the next job starts. Linux's
// /proc tells; elsewhere no process counts as one.
bool is_zombie(pid_t pid) {
  const auto fd = FileDescriptor::open_or_invalid("/proc/" + std::to_string(pid) + "/stat", O_RDONLY);
  if (!fd) return false;
  char text[512];
  const auto n = ::read(fd.get(), text, sizeof text - 1);
  if (n <= 0) return false;
  // "pid (comm) S ...": the state follows the last ')' (comm may hold any byte).
  const std::string_view stat(text, static_cast<std::size_t>(n));
  const auto paren = stat.rfind(')');
  return paren != std::string_view::npos && paren + 2 < stat.size() &&
         (stat[paren + 2] == 'Z' || stat[paren + 2] == 'X');
}

}  // namespace

std::string writer_tag() { return host_for_names() + "." + std::to_string(::getpid()); }

WriterState writer_state(std::string_view tag) {
  const auto dot = tag.rfind('.');
  if (dot == std::string_view::npos || dot == 0 || !is_digits(tag.substr(dot + 1))) return WriterState::Unknown;
  if (tag.substr(0, dot) != host_for_names()) return WriterState::Unknown;
  const auto pid = static_cast<pid_t>(std::stoll(std::string(tag.substr(dot + 1))));
  if (pid <= 0) return WriterState::Unknown;
  if (pid == ::getpid()) return WriterState::Alive;
  if (::kill(pid, 0) == 0 || errno == EPERM) return is_zombie(pid) ? WriterState::Gone : WriterState::Alive;
  return errno == ESRCH ? WriterState::Gone : WriterState::Unknown;
}

WriterState writer_of_temporary(std::string_view file_name) {
  const auto marker = file_name.rfind(kPartialMarker);
  if (marker == std::string_view::npos) return WriterState::Unknown;
  const auto rest = file_name.substr(marker + kPartialMarker.size());  // <host>.<pid>.<random>
  const auto dot = rest.rfind('.');
  if (dot == std::string_view::npos || !is_random_suffix(rest.substr(dot + 1))) return WriterState::Unknown;
  return writer_state(rest.substr(0, dot));
}

std::string temporary_sibling(const std::string& path) {
  const auto [dir, name] = split_path(path);
  if (name.empty()) throw UsageError("h5dcp: checkpoint path '" + path + "' names a directory, not a file");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) throw_errno("writing into the directory '" + dir + "'", errno);
  std::random_device entropy;
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%08x%08x", entropy(), entropy());
  auto temp = "." + name + std::string(kPartialMarker) + writer_tag() + "." + suffix;
  // Without the writer, the name is only removed by whoever holds the directory.
  if (temp.size() > NAME_MAX) temp = "." + name + std::string(kPartialMarker) + suffix;
  return (dir == "." && path.find('/') == std::string::npos ? std::string() : dir + "/") + temp;
}

int remove_partial_siblings(const std::string& path) noexcept {
  try {
    const auto [dir, name] = split_path(path);
    const std::string prefix = "." + name + std::string(kPartialMarker);
    int removed = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const auto file_name = entry.path().filename().string();
      // A writer that may still run is another save in progress: not ours to remove.
      if (file_name.rfind(prefix, 0) != 0 || writer_of_temporary(file_name) != WriterState::Gone) continue;
      std::error_code ignored;
      removed += std::filesystem::remove(entry.path(), ignored) ? 1 : 0;
    }
    return removed;
  } catch (...) {
    return 0;
  }
}

namespace {

void fsync_directory(const std::string& dir) {
  const auto fd = FileDescriptor::open_or_invalid(dir, O_RDONLY | O_DIRECTORY);
  if (!fd) throw_errno("opening the directory '" + dir + "' to fsync it", errno);
  const int rc = ::fsync(fd.get());
  const int error = errno;
  if (rc != 0) throw_errno("fsync of the directory '" + dir + "'", error);
}

}  // namespace

void create_directories_durably(const std::string& dir) {
  std::vector<std::string> created;
  std::string prefix = dir.size() > 0 && dir[0] == '/' ? "/" : "";
  std::size_t start = 0;
  while (start <= dir.size()) {
    const auto slash = std::min(dir.find('/', start), dir.size());
    const auto component = dir.substr(start, slash - start);
    start = slash + 1;
    if (component.empty() || component == ".") continue;
    prefix += (prefix.empty() || prefix.back() == '/' ? "" : "/") + component;
    if (::mkdir(prefix.c_str(), 0777) == 0) {
      created.push_back(prefix);
      continue;
    }
    const int error = errno;
    struct stat info {};
    if (error == EEXIST && ::stat(prefix.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) continue;
    throw_errno("creating the directory '" + prefix + "'", error == EEXIST ? ENOTDIR : error);
  }
  // Deepest first: each new entry is durable before the one leading to it.
  for (auto it = created.rbegin(); it != created.rend(); ++it) fsync_directory(split_path(*it).first);
}

void fsync_file(const std::string& path) {
  const auto fd = FileDescriptor::open_or_invalid(path, O_RDONLY);
  if (!fd) throw_errno("opening '" + path + "' to fsync it", errno);
  const int rc = ::fsync(fd.get());
  const int error = errno;
  if (rc != 0) throw_errno("fsync of '" + path + "'", error);
}

int write_fully(int fd, const void* data, std::size_t size) noexcept {
  const bool short_writes = short_writes_requested();
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const auto n = ::write(fd, p, short_writes ? std::min<std::size_t>(size, 7) : size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;  // no progress on a regular file: do not spin
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return 0;
}

int pwrite_fully(int fd, const void* data, std::size_t size, std::uint64_t offset) noexcept {
  iovec piece{const_cast<void*>(data), size};  // pwritev reads through it, never writes
  return pwritev_fully(fd, std::span<iovec>(&piece, 1), offset);
}

int pwritev_fully(int fd, std::span<iovec> pieces, std::uint64_t offset) noexcept {
  const bool short_writes = short_writes_requested();
  std::size_t next = 0;
  while (next < pieces.size() && pieces[next].iov_len == 0) ++next;
  while (next < pieces.size()) {
    ssize_t n = 0;
    if (short_writes) {
      n = ::pwrite(fd, pieces[next].iov_base, std::min<std::size_t>(pieces[next].iov_len, 7),
                   static_cast<off_t>(offset));
    } else {
      const auto count = static_cast<int>(std::min<std::size_t>(pieces.size() - next, IOV_MAX));
      n = ::pwritev(fd, pieces.data() + next, count, static_cast<off_t>(offset));
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;  // no progress on a regular file: do not spin
    offset += static_cast<std::uint64_t>(n);
    next = consume_pieces(pieces, next, static_cast<std::size_t>(n));
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
  // Not durable yet if this throws: the replaced file keeps its second name,
  // for a later save to this path to remove once this process is gone,
  // rather than being unlinked before the rename is on disk.
  fsync_directory(split_path(to).first);
  if (!retired.empty()) remove_in_background(retired);
}

bool exchange_paths(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0) {
    const int error = errno;
    if (error == EINVAL || error == ENOSYS || error == EOPNOTSUPP || error == ENOENT) return false;
    throw_errno("exchanging '" + from + "' and '" + to + "'", error);
  }
  const auto to_dir = split_path(to).first;
  fsync_directory(to_dir);
  if (const auto from_dir = split_path(from).first; from_dir != to_dir) fsync_directory(from_dir);
  return true;
}

namespace {

// The path a temporary_sibling is published as ("dir/.x.h5.h5dcp-partial.*"
// -> "dir/x.h5"), for messages; other paths as they are.
std::string published_path_of(const std::string& temp) {
  const auto [dir, name] = split_path(temp);
  const auto marker = name.rfind(kPartialMarker);
  if (name.empty() || name[0] != '.' || marker == std::string::npos) return temp;
  return (temp.find('/') == std::string::npos ? std::string() : dir + "/") + name.substr(1, marker - 1);
}

// Throws IoError when the `bytes` the file at `fd` should hold clearly
// cannot fit: more than it has allocated already plus what the file system
// has available. A file system that cannot say is not judged.
void require_free_space(int fd, const std::string& path, std::int64_t bytes) {
  struct stat info {};
  struct statvfs fs {};
  if (::fstat(fd, &info) != 0 || ::fstatvfs(fd, &fs) != 0 || fs.f_frsize == 0) return;
  const auto allocated = static_cast<std::int64_t>(info.st_blocks) * 512;
  const auto to_allocate = bytes - allocated;
  const auto frsize = static_cast<std::uint64_t>(fs.f_frsize);
  const auto max_blocks = static_cast<std::uint64_t>(INT64_MAX) / frsize;
  const auto available = static_cast<std::int64_t>(std::min<std::uint64_t>(fs.f_bavail, max_blocks) * frsize);
  if (to_allocate <= available) return;
  throw IoError("h5dcp: not enough free space for '" + published_path_of(path) + "' (" + std::strerror(ENOSPC) +
                "): the checkpoint needs " + human_bytes(bytes) + ", the file system has " + human_bytes(available) +
                " available; nothing was written (the previous checkpoint is untouched)");
}

}  // namespace

void reserve_space(const std::string& path, std::int64_t bytes) {
  const auto fd = FileDescriptor::open_or_invalid(path, O_WRONLY);
  if (!fd) throw_errno("opening '" + path + "' to reserve space", errno);
  require_free_space(fd.get(), path, bytes);
  const int rc = ::posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes));
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
