#pragma once
// The POSIX side of a CheckpointManager's directory: its lock, its listing,
// its pointer file, the temporaries that dead writers leave in it. Which
// names are steps, which steps to keep and what to point at is the
// manager's policy (manager/checkpoint_manager.cpp). Messages say
// "h5dcp: checkpoint manager: <what> failed: <strerror>".

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage/durable_file.hpp"
#include "storage/file_descriptor.hpp"

namespace h5dcp::detail {

/// The directory lock of a manager (its coordinator), for its lifetime: an
/// fcntl() write lock on a lock file in the directory, because fcntl() locks
/// work on NFS and Lustre (with its flock mount option), unlike flock() on
/// some of them. They belong to the process (a second lock of the same
/// process succeeds, closing any descriptor of the file drops them), so this
/// process's locks are also tracked, by the lock file's device and inode.
class DirectoryLock {
 public:
  /// Throws IoError naming the holder when another job, or another lock of
  /// this process, holds the directory.
  explicit DirectoryLock(const std::string& dir);
  ~DirectoryLock();

  /// False on a file system without fcntl() locks (a warning said so).
  bool locked() const noexcept { return locked_; }

 private:
  std::string path_;
  FileDescriptor fd_;
  bool locked_ = false;
  std::pair<dev_t, ino_t> key_{};
};

/// The names in `dir` (not . and ..), sorted. Throws IoError.
std::vector<std::string> list_names(const std::string& dir);

/// The writer of a file that a writer dying in the directory leaves behind:
/// a save's temporary_sibling, or write_pointer's temporary for the pointer
/// file `pointer`. nullopt for every other name.
std::optional<WriterState> temporary_writer(const std::string& name, std::string_view pointer);

/// The target that the pointer file `dir`/`pointer` names (trailing line end
/// and blanks dropped); nullopt when there is no such file. Throws IoError.
std::optional<std::string> read_pointer(const std::string& dir, const std::string& pointer);

/// `dir`/`pointer` := `target`, atomically and durably: a temporary file
/// written and fsync'd, renamed over the pointer, and the directory fsync'd.
/// Throws IoError.
void write_pointer(const std::string& dir, const std::string& pointer, const std::string& target);

/// Removes `path`; one already gone is fine. Throws IoError "<what> failed".
void remove_file(const std::string& path, const std::string& what);

}  // namespace h5dcp::detail
