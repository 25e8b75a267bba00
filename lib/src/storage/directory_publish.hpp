#pragma once
// Publishing a directory (a DCP checkpoint, sharded safetensors) over the
// one an earlier export left at the same path, and removing such a
// directory, leaving alone the files it holds that are not ours.

#include <functional>
#include <string>

namespace h5dcp::detail {

/// Which files of a directory an export wrote (by name): the only ones
/// retiring it removes.
using OwnFileName = std::function<bool(const std::string& name)>;

/// Publishes the complete, synced directory `from` (a temporary sibling of
/// `dst`) as `dst`. An existing `dst` is exchanged with it in one step where
/// the file system can (exchange_paths), so that `dst` names the old
/// directory or the new one at every moment, a crash included; the old one,
/// now under `from`'s name, is then removed as retire_directory removes it.
/// Where the file system cannot exchange, the old one is retired first and
/// `from` renamed: `dst` is missing between the two (the old directory keeps
/// a hidden name beside it until its removal). Throws IoError when the
/// publish fails; the removal of the old one never throws.
void publish_directory(const std::string& from, const std::string& dst, const OwnFileName& ours);

/// Moves the directory `dst` aside (to a temporary_sibling), removes the
/// files in it for which `ours` holds, and removes it when nothing else is
/// left. Never throws: a directory it cannot move is left where it was.
void retire_directory(const std::string& dst, const OwnFileName& ours) noexcept;

}  // namespace h5dcp::detail
