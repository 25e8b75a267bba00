#pragma once
// Reversible mapping between state-dict keys and HDF5 link names. HDF5 names
// cannot contain '/' and cannot be "." or empty; everything else (dots,
// spaces, UTF-8) is kept as is so names stay readable in h5ls and h5py.
// '%' starts an escape: "%25" is '%', "%2F" is '/', "%2E" is a key that is
// exactly ".", and a lone "%" is the empty key. Pure string code.

#include <string>
#include <string_view>

namespace h5dcp::detail {

std::string escape_link_name(std::string_view key);

/// Inverse of escape_link_name; throws FormatError on a malformed escape.
std::string unescape_link_name(std::string_view name);

}  // namespace h5dcp::detail
