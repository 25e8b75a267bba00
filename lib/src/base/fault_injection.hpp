#pragma once
// Fault injection for tests: make a chosen rank fail, stall, die or write
// short at a chosen point.
//
// H5DCP_INJECT_FAULT is a comma-separated list of "<point>@<rank><action>":
//   <point>@<rank>           throw h5dcp::Error there;
//   <point>@<rank>~<seconds> stall there (sleep), to test deadlines;
//   <point>@<rank>!kill      die there by SIGKILL, to test crash safety;
//   <point>@<rank>!short     make the writes at that point short: only the
//                            first half of each block reaches the file.
// <rank> is a number or "*" (every rank). Points are the collective steps'
// names ("save:plan", "save:create", "save:reserve", "save:write",
// "save:checksums", "save:sync", "save:commit", "load:metadata", "load:plan",
// "load:open", "load:read", "load:commit", ...: Comm runs fault_point in
// every step, after the rank's own work in it, so that no rank skips a
// collective HDF5 call, unless the step placed that point earlier itself), plus "save:block" (resolving each block to
// write), "async:stage" (staging each piece) and "posix:write" (our own POSIX write loop, where "!short" makes every
// write(2) return after a few bytes). In a broadcast step ("save:reserve", "save:commit", "load:metadata") only the
// coordinator works; a throw injected on another rank there is ignored. The variable is read at every call, so a test
// can set and clear it between saves. It costs one getenv per phase, nothing per byte.

#include <string_view>

namespace h5dcp::detail {

/// Throws h5dcp::Error("injected fault at <point> on rank <rank>"), stalls or
/// kills this process when H5DCP_INJECT_FAULT asks for it at this point and
/// rank; does nothing otherwise (or for "!short", see short_write_requested).
void fault_point(std::string_view point, int rank);

/// Comm's part: a collective step begins on this thread ...
void begin_fault_step();
/// ... and this rank's work in it is done: fires the point named after the
/// step, unless the work passed that point itself (save:commit does, before
/// its rename), so that one step fires its point once.
void fault_point_after_step(std::string_view step, int rank);

/// Whether H5DCP_INJECT_FAULT asks for short writes at this point and rank.
bool short_write_requested(std::string_view point, int rank);

}  // namespace h5dcp::detail
