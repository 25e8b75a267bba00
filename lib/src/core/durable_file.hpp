#pragma once
// POSIX pieces of atomic, durable publishing: a temporary sibling name, fsync
// of a file and of its directory, rename into place.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace h5dcp::detail {

/// What marks a hidden sibling as a partial (or retired) file of a save.
inline constexpr std::string_view kPartialMarker = ".h5dcp-partial.";

/// A fresh name in the directory of `path`: ".<name>.h5dcp-partial.<random>".
/// Readers never open such a name: they open `path`. Throws IoError when the
/// directory does not exist or is not writable.
std::string temporary_sibling(const std::string& path);

/// Removes what earlier saves to `path` left behind when they died (killed
/// ranks never clean up): every temporary_sibling of `path`. Only one save
/// to a path may run at a time. Returns how many were removed; never throws.
int remove_partial_siblings(const std::string& path) noexcept;

/// fsync()s the file at `path`. Throws IoError with errno's text.
void fsync_file(const std::string& path);

/// Renames `from` to `to` (atomically replacing `to`) and fsync()s the
/// directory so the rename itself is durable. Throws IoError.
///
/// A large file that `to` replaces is first given a second, hidden name (a
/// temporary_sibling of `to`), so the rename does not free its blocks; once
/// the rename is durable that name is removed in the background
/// (core/deferred_removal.hpp): on ext4 with `discard` this takes a quarter
/// of a second per GiB off every save that overwrites a checkpoint.
void publish_by_rename(const std::string& from, const std::string& to);

/// Size from which publish_by_rename removes a replaced file in the background.
inline constexpr std::int64_t kBackgroundRemovalBytes = 16 << 20;

/// Makes the file system set aside the first `bytes` of `path` now
/// (posix_fallocate), so that a full disk fails here, before any data is
/// written, rather than in the middle of a collective write. A file system
/// that cannot reserve space is left alone. Throws IoError (e.g. ENOSPC).
void reserve_space(const std::string& path, std::int64_t bytes);

/// Writes all `size` bytes of `data` to `fd`, going on after short writes
/// and EINTR. Returns 0, or the errno of the write(2) that failed. Fault
/// injection "posix:write@*!short" makes every write(2) take at most 7 bytes.
int write_fully(int fd, const void* data, std::size_t size) noexcept;

/// Removes `path` if it exists; never throws (used on failure paths).
void remove_quietly(const std::string& path) noexcept;

/// The current UTC time as ISO-8601, e.g. "2026-11-21T23:59:01Z".
std::string utc_now_iso8601();

}  // namespace h5dcp::detail
