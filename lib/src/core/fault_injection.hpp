#pragma once
// Fault injection for tests: make a chosen rank fail at a chosen point.
//
// H5DCP_INJECT_FAULT="<point>@<rank>[,<point>@<rank>...]" makes
// fault_point(point, rank) throw on that rank; "<point>@<rank>~<seconds>"
// makes it stall there instead (sleep), to test deadlines. Points are named after the
// phases ("save:plan", "save:write", "save:commit", "load:read", ...). The
// variable is read at every call, so a test can set and clear it between
// saves. It costs one getenv per phase, nothing per byte.

#include <string_view>

namespace h5dcp::detail {

/// Throws h5dcp::Error("injected fault at <point> on rank <rank>") when
/// H5DCP_INJECT_FAULT names this point and rank.
void fault_point(std::string_view point, int rank);

}  // namespace h5dcp::detail
