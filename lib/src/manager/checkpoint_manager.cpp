// CheckpointManager: step checkpoints in a directory, an atomic `latest`
// pointer, retention, resuming from the newest complete checkpoint, and
// removal of orphaned partial files.
//
// Who does what: every rank takes part in the saves and loads (h5dcp::save,
// the async save engine, h5dcp::read_metadata, h5dcp::load); only the coordinator
// touches the directory itself (listing, `latest`, retention, orphans) and
// shares what it saw or what failed through the exception-robust steps of
// detail::Comm, so a failure there is still the same CheckpointError on
// every rank.

#include "h5dcp/checkpoint_manager.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string_view>
#include <utility>

#include "api/async_save_engine.hpp"
#include "base/byte_codec.hpp"
#include "base/exception_text.hpp"
#include "comm/comm.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/save_plan_cache.hpp"
#include "storage/durable_file.hpp"
#include "storage/file_descriptor.hpp"

namespace h5dcp {
namespace {

constexpr std::string_view kPrefix = "step-";
constexpr std::string_view kSuffix = ".h5";
constexpr const char* kPointer = "latest";
constexpr std::string_view kPointerTemp = ".latest.tmp.";
// The directory lock's file: fcntl() locks work on NFS and Lustre (with its
// flock mount option), unlike flock() on some of them. Never removed: a
// file nobody holds a lock on is no lock.
constexpr const char* kLockFile = ".h5dcp-manager.lock";

std::string file_name_for(std::int64_t step) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%08lld", static_cast<long long>(step));
  return std::string(kPrefix) + digits + std::string(kSuffix);
}

// The step of a checkpoint file name, when it is exactly file_name_for(step).
std::optional<std::int64_t> step_of(const std::string& name) {
  if (name.size() <= kPrefix.size() + kSuffix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0 ||
      name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return std::nullopt;
  const auto digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const auto step = static_cast<std::int64_t>(std::stoll(digits));
  if (file_name_for(step) != name) return std::nullopt;
  return step;
}

// "h5dcp: checkpoint manager: <what> failed: <strerror(error)>".
[[noreturn]] void throw_errno(const std::string& what, int error) {
  detail::throw_errno("checkpoint manager: " + what, error);
}

std::vector<std::string> list_names(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) throw_errno("listing '" + dir + "'", errno);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  const int error = errno;
  ::closedir(d);
  if (error != 0) throw_errno("listing '" + dir + "'", error);
  std::sort(names.begin(), names.end());
  return names;
}

// Steps of the checkpoint files, ascending.
std::vector<std::int64_t> list_steps(const std::string& dir) {
  std::vector<std::int64_t> steps;
  for (const auto& name : list_names(dir))
    if (const auto step = step_of(name)) steps.push_back(*step);
  std::sort(steps.begin(), steps.end());
  return steps;
}

bool is_orphan(const std::string& name) {
  if (name.empty() || name[0] != '.') return false;
  return name.find(detail::kPartialMarker) != std::string::npos ||
         name.compare(0, kPointerTemp.size(), kPointerTemp) == 0;
}

// Whether the process that wrote the temporary file `name` may still run.
detail::WriterState writer_of(const std::string& name) {
  if (name.compare(0, kPointerTemp.size(), kPointerTemp) == 0)
    return detail::writer_state(std::string_view(name).substr(kPointerTemp.size()));
  return detail::writer_of_temporary(name);
}

// Which orphans to remove: with the directory locked no other manager uses
// it, so everything but a temporary file whose writer provably still runs
// (a plain h5dcp::save into the directory on this host); without the lock,
// only those whose writer is provably gone.
bool may_remove(const std::string& name, bool locked) {
  const auto writer = writer_of(name);
  return locked ? writer != detail::WriterState::Alive : writer == detail::WriterState::Gone;
}

// The directory lock of a manager: an fcntl() write lock on DIR/kLockFile,
// held by the coordinator for the manager's lifetime. fcntl() locks belong
// to the process (a second lock of the same process succeeds, and closing
// any descriptor of the file drops them), so the managers of this process
// are also tracked here, by the lock file's device and inode, and the file
// is never opened while this process holds it.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& dir) : path_(dir + "/" + kLockFile) {
    std::lock_guard<std::mutex> guard(mutex());
    struct stat info {};
    if (::stat(path_.c_str(), &info) == 0 && held().count(key_of(info)) != 0) throw in_use(dir, "this process");
    fd_ = detail::FileDescriptor::open_or_invalid(path_, O_RDWR | O_CREAT, 0644);
    if (!fd_) throw_errno("opening the lock file '" + path_ + "'", errno);
    // Every descriptor closes under the mutex, even on a throw: closing any
    // descriptor of the file drops this process's lock on it (see held()).
    if (::fstat(fd_.get(), &info) != 0) {
      const int error = errno;
      fd_.close_quietly();
      throw_errno("stat of the lock file '" + path_ + "'", error);
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
        throw_errno("locking '" + path_ + "'", error);
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
      record_holder();
    }
    key_ = key_of(info);
    held().insert(key_);
  }

  ~DirectoryLock() {
    std::lock_guard<std::mutex> guard(mutex());
    held().erase(key_);
    fd_.close_quietly();  // releases the lock (under the mutex: see held())
  }

  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

  /// False on a file system without fcntl() locks.
  bool locked() const noexcept { return locked_; }

 private:
  using Key = std::pair<dev_t, ino_t>;
  static Key key_of(const struct stat& info) { return {info.st_dev, info.st_ino}; }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::set<Key>& held() {
    static std::set<Key> keys;
    return keys;
  }

  static std::string holder_text() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "?");
    return "pid " + std::to_string(::getpid()) + " on host " + host;
  }

  // Who holds the lock, as its holder wrote it into the file (the pid that
  // F_GETLK reports is the holder's own only on a local file system).
  static std::string holder_of(int fd) {
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
  void record_holder() {
    const auto text = holder_text() + "\n";
    if (::ftruncate(fd_.get(), 0) == 0) (void)!::pwrite(fd_.get(), text.data(), text.size(), 0);
  }

  static IoError in_use(const std::string& dir, const std::string& by, const std::string& holder = holder_text()) {
    return IoError("h5dcp: checkpoint directory '" + dir + "' is in use by " +
                   (by == "this process" ? "another CheckpointManager of this process" : by) + " (lock held by " +
                   holder + "); one manager (one job) at a time per directory");
  }

  std::string path_;
  detail::FileDescriptor fd_;
  bool locked_ = false;
  Key key_{};
};

std::optional<std::string> read_pointer(const std::string& dir) {
  const auto path = dir + "/" + kPointer;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    if (errno == ENOENT) return std::nullopt;
    throw_errno("reading '" + path + "'", errno);
  }
  char buffer[512];
  const auto n = std::fread(buffer, 1, sizeof buffer, f);
  std::fclose(f);
  std::string text(buffer, n);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  return text;
}

// `latest` := name, atomically and durably: a temporary file written and
// fsync'd, renamed over `latest`, and the directory fsync'd.
void write_pointer(const std::string& dir, const std::string& name) {
  const auto temp = dir + "/" + std::string(kPointerTemp) + detail::writer_tag();
  auto fd = detail::FileDescriptor::open_or_invalid(temp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (!fd) throw_errno("creating '" + temp + "'", errno);
  const std::string text = name + "\n";
  const int write_error = detail::write_fully(fd.get(), text.data(), text.size());
  const int sync = write_error == 0 ? ::fsync(fd.get()) : -1;
  const int sync_error = errno;
  fd.close_quietly();
  if (write_error != 0 || sync != 0) {
    detail::remove_quietly(temp);
    throw_errno("writing '" + temp + "'", write_error != 0 ? write_error : sync_error);
  }
  try {
    detail::publish_by_rename(temp, dir + "/" + kPointer);
  } catch (...) {
    detail::remove_quietly(temp);
    throw;
  }
}

// The steps that retention removes once `saved` is published.
std::vector<std::int64_t> steps_to_remove(const std::vector<std::int64_t>& ascending, const Retention& r,
                                          std::int64_t saved) {
  std::vector<std::int64_t> remove;
  const auto n = static_cast<std::int64_t>(ascending.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const auto step = ascending[static_cast<std::size_t>(i)];
    const bool newest = r.keep_last <= 0 || i >= n - r.keep_last;
    const bool milestone = r.keep_every > 0 && step % r.keep_every == 0;
    if (!newest && !milestone && step != saved) remove.push_back(step);
  }
  return remove;
}

}  // namespace

struct CheckpointManager::Impl {
  MPI_Comm user_comm;
  detail::Comm comm;
  ManagerOptions options;
  detail::AsyncSaveSlot saver;  // its own engine: staging freed with the manager
  SavePlanCache plan_cache;     // for saves that bring no planner and no cache

  struct InFlight {
    std::int64_t step;
    SaveFuture future;
  };
  std::optional<InFlight> in_flight;
  // The last async save, once finished, until wait() reports it.
  std::optional<SaveResult> finished;
  std::exception_ptr save_failure;      // the same on every rank
  std::string publish_failure;          // the coordinator's only
  std::unique_ptr<DirectoryLock> lock;  // the coordinator's only

  Impl(MPI_Comm c, const ManagerOptions& o) : user_comm(c), comm(c, o.coordinator), options(o) {}
};

CheckpointManager::CheckpointManager(std::string directory, Retention retention, MPI_Comm comm, ManagerOptions options)
    : directory_(std::move(directory)), retention_(retention) {
  while (directory_.size() > 1 && directory_.back() == '/') directory_.pop_back();
  impl_ = std::make_unique<Impl>(comm, options);
  auto& c = impl_->comm;
  c.require_same("checkpoint directories", directory_);
  c.require_same("retention policies",
                 std::to_string(retention_.keep_last) + "/" + std::to_string(retention_.keep_every));
  if (directory_.empty()) throw UsageError("h5dcp: CheckpointManager needs a directory");
  if (retention_.keep_last < 0 || retention_.keep_every < 0)
    throw UsageError("h5dcp: Retention::keep_last and keep_every must be >= 0");
  const auto removed = c.broadcast("checkpoint-manager:start", [&] {
    detail::create_directories_durably(directory_);
    // Before anything in the directory is touched: a second job's manager
    // must not remove the first one's save in progress.
    impl_->lock = std::make_unique<DirectoryLock>(directory_);
    detail::ByteWriter out;
    std::vector<std::string> orphans;
    for (const auto& name : list_names(directory_))
      if (is_orphan(name) && may_remove(name, impl_->lock->locked())) orphans.push_back(directory_ + "/" + name);
    out.put<std::uint64_t>(orphans.size());
    for (const auto& path : orphans) {
      if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw_errno("removing '" + path + "'", errno);
      out.put_string(path);
    }
    return out.take();
  });
  detail::ByteReader in(removed);
  for (auto n = in.get<std::uint64_t>(); n > 0; --n) removed_orphans_.push_back(in.get_string());
}

CheckpointManager::~CheckpointManager() {
  auto& impl = *impl_;
  if (impl.in_flight) {
    impl.in_flight->future.wait();
    poll();
  }
  if (impl.comm.is_coordinator()) {
    if (impl.save_failure) {
      try {
        std::rethrow_exception(impl.save_failure);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "h5dcp: checkpoint manager: the last async save failed: %s\n",
                     detail::exception_text(e).c_str());
      }
    }
    if (!impl.publish_failure.empty())
      std::fprintf(stderr, "h5dcp: checkpoint manager: %s\n", impl.publish_failure.c_str());
  }
  impl.saver.finish();  // waits for nothing: no save is in flight any more
  impl.lock.reset();    // the directory is free for the next manager
}

std::string CheckpointManager::path_for(std::int64_t step) const { return directory_ + "/" + file_name_for(step); }

std::optional<std::int64_t> CheckpointManager::in_flight() const {
  if (!impl_->in_flight) return std::nullopt;
  return impl_->in_flight->step;
}

bool CheckpointManager::poll() {
  auto& impl = *impl_;
  if (!impl.in_flight) return true;
  if (impl.in_flight->future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
  const auto step = impl.in_flight->step;
  try {
    impl.finished = impl.in_flight->future.get();
  } catch (...) {
    impl.save_failure = std::current_exception();
  }
  impl.in_flight.reset();
  if (!impl.save_failure && impl.comm.is_coordinator()) {
    // Published (the future is ready only after the rename): point at it.
    try {
      write_pointer(directory_, file_name_for(step));
      for (const auto old : steps_to_remove(list_steps(directory_), retention_, step))
        if (::unlink(path_for(old).c_str()) != 0 && errno != ENOENT)
          throw_errno("removing the old checkpoint '" + path_for(old) + "'", errno);
    } catch (const std::exception& e) {
      impl.publish_failure = detail::exception_text(e);
    }
  }
  return true;
}

std::optional<SaveResult> CheckpointManager::wait() {
  auto& impl = *impl_;
  if (impl.in_flight) {
    impl.in_flight->future.wait();
    poll();
  }
  // The save's own failure is the same CheckpointError on every rank.
  if (impl.save_failure) {
    auto failure = std::exchange(impl.save_failure, nullptr);
    impl.finished.reset();
    std::rethrow_exception(failure);
  }
  // Publishing is the coordinator's: its failure becomes everyone's.
  impl.comm.broadcast("checkpoint-manager:publish", [&] {
    if (!impl.publish_failure.empty()) throw IoError(std::exchange(impl.publish_failure, std::string()));
    return detail::Bytes();
  });
  return std::exchange(impl.finished, std::nullopt);
}

SaveResult CheckpointManager::save(std::int64_t step, const StateDict& state, const SaveOptions& options) {
  auto& impl = *impl_;
  if (step < 0) throw UsageError("h5dcp: checkpoint steps must be >= 0, not " + std::to_string(step));
  wait();
  auto o = options;
  o.coordinator = impl.options.coordinator;
  if (o.planner == nullptr && o.plan_cache == nullptr) o.plan_cache = &impl.plan_cache;
  auto result = h5dcp::save(state, path_for(step), o, impl.user_comm);
  impl.comm.broadcast("checkpoint-manager:publish", [&] {
    write_pointer(directory_, file_name_for(step));
    for (const auto old : steps_to_remove(list_steps(directory_), retention_, step))
      if (::unlink(path_for(old).c_str()) != 0 && errno != ENOENT)
        throw_errno("removing the old checkpoint '" + path_for(old) + "'", errno);
    return detail::Bytes();
  });
  return result;
}

SaveFuture CheckpointManager::async_save(std::int64_t step, const StateDict& state, const AsyncSaveOptions& options) {
  return start_async_save(step, state, options, false).saved;
}

StagedSave CheckpointManager::async_stage_and_save(std::int64_t step, const StateDict& state,
                                                   const AsyncSaveOptions& options) {
  return start_async_save(step, state, options, true);
}

StagedSave CheckpointManager::start_async_save(std::int64_t step, const StateDict& state,
                                               const AsyncSaveOptions& options, bool stage_in_background) {
  auto& impl = *impl_;
  if (step < 0) throw UsageError("h5dcp: checkpoint steps must be >= 0, not " + std::to_string(step));
  wait();
  auto o = options;
  o.coordinator = impl.options.coordinator;
  if (o.planner == nullptr && o.plan_cache == nullptr) o.plan_cache = &impl.plan_cache;
  auto handles = impl.saver.save(state, path_for(step), o, impl.user_comm, stage_in_background);
  impl.in_flight = Impl::InFlight{step, handles.saved};
  return handles;
}

std::vector<std::int64_t> CheckpointManager::steps() {
  const auto listing = impl_->comm.broadcast("checkpoint-manager:list", [&] {
    detail::ByteWriter out;
    out.put_ints(list_steps(directory_));
    return out.take();
  });
  detail::ByteReader in(listing);
  return in.get_ints();
}

std::optional<CheckpointInfo> CheckpointManager::latest() {
  auto& impl = *impl_;
  if (impl.in_flight) {  // its failure, if any, stays for the next wait()
    impl.in_flight->future.wait();
    poll();
  }
  const auto listing = impl.comm.broadcast("checkpoint-manager:list", [&] {
    detail::ByteWriter out;
    out.put_ints(list_steps(directory_));
    const auto pointer = read_pointer(directory_);
    out.put<std::uint8_t>(pointer ? 1 : 0);
    out.put_string(pointer.value_or(""));
    return out.take();
  });
  detail::ByteReader in(listing);
  auto ascending = in.get_ints();
  scan_ = CheckpointScan{};
  if (in.get<std::uint8_t>() != 0) scan_.pointer = in.get_string();
  for (auto it = ascending.rbegin(); it != ascending.rend(); ++it) {
    const auto path = path_for(*it);
    try {
      read_metadata(path, {impl.options.coordinator}, impl.user_comm);
    } catch (const Error& e) {
      scan_.skipped.push_back(SkippedCheckpoint{*it, path, e.what()});
      if (impl.comm.is_coordinator())
        std::fprintf(stderr, "h5dcp: warning: checkpoint manager: skipping '%s', not a readable checkpoint: %s\n",
                     path.c_str(), e.what());
      continue;
    }
    scan_.pointer_current = scan_.pointer == file_name_for(*it);
    return CheckpointInfo{*it, path};
  }
  return std::nullopt;
}

std::optional<CheckpointInfo> CheckpointManager::load(StateDict& state, const LoadOptions& options) {
  auto found = latest();
  if (!found) return std::nullopt;
  auto o = options;
  o.coordinator = impl_->options.coordinator;
  h5dcp::load(state, found->path, o, impl_->user_comm);
  return found;
}

}  // namespace h5dcp
