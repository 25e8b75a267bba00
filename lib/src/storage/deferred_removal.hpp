#pragma once
// Removing large files off the caller's critical path.
//
// Freeing a large file's blocks is slow on some file systems (ext4 mounted
// with `discard` takes about a quarter of a second per GiB, in the unlink
// that drops the last link), and a save that replaces the previous
// checkpoint at the same path need not wait for it. One process-wide
// background thread removes the files handed to it, in order; it is started
// on first use and finishes its queue when the process exits normally.
// Files whose removal a killed process never got to keep their hidden
// ".h5dcp-partial." names, so the next save to that path removes them
// (remove_partial_siblings).

#include <string>

namespace h5dcp::detail {

/// Unlinks `path` on the background thread. Never throws: a failure to
/// allocate the queue entry removes the file here instead.
void remove_in_background(const std::string& path) noexcept;

/// Blocks until every removal handed over so far is done (for tests, and for
/// callers that must know the space is free).
void finish_background_removals() noexcept;

}  // namespace h5dcp::detail
