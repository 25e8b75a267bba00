#pragma once
// POSIX pieces of atomic, durable publishing: a temporary sibling name, fsync
// of a file and of its directory, rename into place.

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace h5dcp::detail {

/// What marks a hidden sibling as a partial (or retired) file of a save.
inline constexpr std::string_view kPartialMarker = ".h5dcp-partial.";

/// A fresh name in the directory of `path`:
/// ".<name>.h5dcp-partial.<host>.<pid>.<random>", naming the process that
/// writes it (writer_of_temporary), or ".<name>.h5dcp-partial.<random>" when
/// that would make the name longer than a file name may be. Readers never
/// open such a name: they open `path`. Throws IoError when the directory
/// does not exist or is not writable.
std::string temporary_sibling(const std::string& path);

/// Whether the process that wrote a temporary file (by its file name) still
/// runs: Alive and Gone only for a writer on this host (same host name; its
/// pid is alive and not a zombie, or is this process); Unknown for another host's writer or a
/// name without a writer (older versions, very long names).
enum class WriterState { Alive, Gone, Unknown };
WriterState writer_of_temporary(std::string_view file_name);
/// The same for a writer tag "<host>.<pid>" (writer_tag()).
WriterState writer_state(std::string_view tag);

/// The "<host>.<pid>" that temporary_sibling and other temporary names of
/// this process carry.
std::string writer_tag();

/// Removes what earlier saves to `path` left behind when they died (killed
/// ranks never clean up): every temporary_sibling of `path` whose writer is
/// Gone. One whose writer may still run (another job saving to the same
/// path, on this host or another) is left alone: whoever holds the
/// directory (CheckpointManager's lock) removes the Unknown ones. Returns
/// how many were removed; never throws.
int remove_partial_siblings(const std::string& path) noexcept;

/// Creates `dir` and its missing parents (like mkdir -p) and fsync()s the
/// parent of each directory it created, so that a checkpoint published in a
/// new directory survives a crash with the directory entries leading to it.
/// Throws IoError.
void create_directories_durably(const std::string& dir);

/// fsync()s the file at `path`. Throws IoError with errno's text.
void fsync_file(const std::string& path);

/// Renames `from` to `to` (atomically replacing `to`) and fsync()s the
/// directory so the rename itself is durable. Throws IoError.
///
/// A large file that `to` replaces is first given a second, hidden name (a
/// temporary_sibling of `to`), so the rename does not free its blocks; once
/// the rename is durable that name is removed in the background
/// (storage/deferred_removal.hpp): on ext4 with `discard` this takes a quarter
/// of a second per GiB off every save that overwrites a checkpoint.
void publish_by_rename(const std::string& from, const std::string& to);

/// Swaps `from` and `to` in one step (renameat2 with RENAME_EXCHANGE: `to`
/// names one of the two at every moment, never nothing) and fsync()s the
/// directories that hold them. rename(2) cannot put a directory over a
/// non-empty one; this can. Returns false, having changed nothing, where it
/// cannot be done: a file system or kernel without the exchange (EINVAL,
/// ENOSYS, EOPNOTSUPP) or a path that does not exist (ENOENT). Throws
/// IoError on any other failure, or when an fsync fails after the swap.
bool exchange_paths(const std::string& from, const std::string& to);

/// Size from which publish_by_rename removes a replaced file in the background.
inline constexpr std::int64_t kBackgroundRemovalBytes = 16 << 20;

/// Makes the file system set aside the first `bytes` of `path` now
/// (posix_fallocate), so that a full disk fails here, before any data is
/// written, rather than in the middle of a collective write. A file system
/// that cannot reserve space is left alone. First, when the space still to
/// allocate is more than the file system has available to this user
/// (statvfs f_bavail), throws IoError without allocating anything: reserving
/// would fill a shared disk to the brim before failing (and glibc's fallback
/// for file systems without fallocate writes zeros until it does). Throws
/// IoError (e.g. ENOSPC).
void reserve_space(const std::string& path, std::int64_t bytes);

/// Writes all `size` bytes of `data` to `fd`, going on after short writes
/// and EINTR. Returns 0, or the errno of the write(2) that failed. Fault
/// injection "posix:write@*!short" makes every write(2) take at most 7 bytes.
int write_fully(int fd, const void* data, std::size_t size) noexcept;

/// Writes all `size` bytes of `data` to `fd` at `offset` (pwrite), going on
/// after short writes and EINTR. Returns 0, or the errno of the pwrite(2)
/// that failed (fault injection as write_fully).
int pwrite_fully(int fd, const void* data, std::size_t size, std::uint64_t offset) noexcept;

/// Writes the consecutive bytes the buffers `pieces` name, in order, to `fd`
/// at `offset`, as few pwritev(2) calls as IOV_MAX allows, going on after
/// short writes and EINTR. `pieces` is consumed. Returns 0, or the errno of
/// the call that failed (fault injection as write_fully).
int pwritev_fully(int fd, std::span<iovec> pieces, std::uint64_t offset) noexcept;

/// Removes `path` if it exists; never throws (used on failure paths).
void remove_quietly(const std::string& path) noexcept;

/// The current UTC time as ISO-8601, e.g. "2026-11-21T23:59:01Z".
std::string utc_now_iso8601();

}  // namespace h5dcp::detail
