#include "storage/checkpoint_directory.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

// Never removed: a file nobody holds a lock on is no lock.
constexpr const char* kLockFile = ".h5dcp-manager.lock";

[[noreturn]] void throw_manager_errno(const std::string& what, int error) {
  throw_errno("checkpoint manager: " + what, error);
}

std::pair<dev_t, ino_t> key_of(const struct stat& info) { return {info.st_dev, info.st_ino}; }
// The lock files this process holds (device, inode), and the mutex under
// which any descriptor of them closes (closing one drops the process's lock).
struct Held {
  std::mutex mutex;
  std::set<std::pair<dev_t, ino_t>> keys;
};
Held& held() {
  static Held h;
  return h;
}

std::string holder_text() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "?");
  return "pid " + std::to_string(::getpid()) + " on host " + host;
}

// Who holds the lock, as its holder wrote it into the file (the pid that
// F_GETLK reports is the holder's own only on a local file system).
std::string holder_of(int fd) {
  char text[300] = {};
  const auto n = ::pread(fd, text, sizeof text - 1, 0);
  std::string holder(text, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
  if (holder.rfind("pid ", 0) == 0 && holder.find('\n') == std::string::npos) return holder;
  struct flock probe {};
  probe.l_type = F_WRLCK;
  probe.l_whence = SEEK_SET;
  if (::fcntl(fd, F_GETLK, &probe) == 0 && probe.l_type != F_UNLCK && probe.l_pid > 0)
    return "pid " + std::to_string(probe.l_pid) + " on an unknown host";
  return "an unknown process";
}

// For the message of a job refused by this lock; informative only.
void record_holder(int fd) {
  const auto text = holder_text() + "\n";
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, text.data(), text.size(), 0);
}

IoError in_use(const std::string& dir, const std::string& by, const std::string& holder = holder_text()) {
  return IoError("h5dcp: checkpoint directory '" + dir + "' is in use by " +
                 (by == "this process" ? "another CheckpointManager of this process" : by) + " (lock held by " +
                 holder + "); one manager (one job) at a time per directory");
}

std::string pointer_temp_prefix(std::string_view pointer) { return "." + std::string(pointer) + ".tmp."; }

}  // namespace

DirectoryLock::DirectoryLock(const std::string& dir) : path_(dir + "/" + kLockFile) {
  std::lock_guard<std::mutex> guard(held().mutex);
  struct stat info {};
  if (::stat(path_.c_str(), &info) == 0 && held().keys.count(key_of(info)) != 0) throw in_use(dir, "this process");
  fd_ = FileDescriptor::open_or_invalid(path_, O_RDWR | O_CREAT, 0644);
  if (!fd_) throw_manager_errno("opening the lock file '" + path_ + "'", errno);
  // Every descriptor closes under the mutex, even on a throw: closing any
  // descriptor of the file drops this process's lock on it (see held()).
  if (::fstat(fd_.get(), &info) != 0) {
    const int error = errno;
    fd_.close_quietly();
    throw_manager_errno("stat of the lock file '" + path_ + "'", error);
  }
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (::fcntl(fd_.get(), F_SETLK, &lock) != 0) {
    const int error = errno;
    if (error == EACCES || error == EAGAIN) {
      const auto holder = holder_of(fd_.get());
      fd_.close_quietly();  // this process holds no lock on the file: closing drops nothing
      throw in_use(dir, "another job", holder);
    }
    if (error != ENOLCK && error != EOPNOTSUPP && error != ENOSYS && error != EINVAL) {
      fd_.close_quietly();
      throw_manager_errno("locking '" + path_ + "'", error);
    }
    // A file system without fcntl() locks (Lustre mounted without flock):
    // go on as before locks, but say so.
    std::fprintf(stderr,
                 "h5dcp: warning: checkpoint manager: cannot lock '%s' (%s): a second job on '%s' would not be "
                 "detected\n",
                 path_.c_str(), std::strerror(error), dir.c_str());
    locked_ = false;
  } else {
    locked_ = true;
    record_holder(fd_.get());
  }
  key_ = key_of(info);
  held().keys.insert(key_);
}

DirectoryLock::~DirectoryLock() {
  std::lock_guard<std::mutex> guard(held().mutex);
  held().keys.erase(key_);
  fd_.close_quietly();  // releases the lock (under the mutex: see held())
}

std::vector<std::string> list_names(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end; it.increment(error))
    names.push_back(it->path().filename().string());
  if (error) throw_manager_errno("listing '" + dir + "'", error.value());
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<WriterState> temporary_writer(const std::string& name, std::string_view pointer) {
  if (name.empty() || name[0] != '.') return std::nullopt;
  const auto prefix = pointer_temp_prefix(pointer);
  if (name.compare(0, prefix.size(), prefix) == 0) return writer_state(std::string_view(name).substr(prefix.size()));
  if (name.find(kPartialMarker) != std::string::npos) return writer_of_temporary(name);
  return std::nullopt;
}

std::optional<std::string> read_pointer(const std::string& dir, const std::string& pointer) {
  const auto path = dir + "/" + pointer;
  const auto fd = FileDescriptor::open_or_invalid(path, O_RDONLY);
  if (!fd) {
    if (errno == ENOENT) return std::nullopt;
    throw_manager_errno("reading '" + path + "'", errno);
  }
  char buffer[512];
  const auto n = ::read(fd.get(), buffer, sizeof buffer);
  std::string text(buffer, n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

void write_pointer(const std::string& dir, const std::string& pointer, const std::string& target) {
  const auto temp = dir + "/" + pointer_temp_prefix(pointer) + writer_tag();
  auto fd = FileDescriptor::open_or_invalid(temp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!fd) throw_manager_errno("creating '" + temp + "'", errno);
  const std::string text = target + "\n";
  const int write_error = write_fully(fd.get(), text.data(), text.size());
  const int sync = write_error == 0 ? ::fsync(fd.get()) : -1;
  const int sync_error = errno;
  fd.close_quietly();
  if (write_error != 0 || sync != 0) {
    remove_quietly(temp);
    throw_manager_errno("writing '" + temp + "'", write_error != 0 ? write_error : sync_error);
  }
  try {
    publish_by_rename(temp, dir + "/" + pointer);
  } catch (...) {
    remove_quietly(temp);
    throw;
  }
}

void remove_file(const std::string& path, const std::string& what) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw_manager_errno(what, errno);
}

}  // namespace h5dcp::detail
