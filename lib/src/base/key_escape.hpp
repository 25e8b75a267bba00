#pragma once
// Reversible mapping between state-dict keys and HDF5 link names. HDF5 names
// cannot contain '/' and cannot be "." or empty; everything else (dots,
// spaces, UTF-8) is kept as is so names stay readable in h5ls and h5py.
// '%' starts an escape: "%25" is '%', "%2F" is '/', "%2E" is a key that is
// exactly ".", and a lone "%" is the empty key. Pure string code.

#include <cstddef>
#include <string>
#include <string_view>

namespace h5dcp::detail {

// hostile-input limit: the deepest nesting of dicts and lists a checkpoint
// may hold (a container's fqn has at most kMaxContainerDepth - 1 keys).
// Real state dicts nest a handful of levels (optim/state/<id>/exp_avg, a
// module tree); the reader's walk recurses once per level, and a crafted
// file of a few hundred KB can nest thousands of groups. A save refuses
// deeper nesting (require_readable_depth), so it never writes a file that
// the reader would refuse.
constexpr std::size_t kMaxContainerDepth = 256;

std::string escape_link_name(std::string_view key);

/// Inverse of escape_link_name; throws FormatError on a malformed escape.
std::string unescape_link_name(std::string_view name);

/// `text` for an error message: control bytes (NUL included), DEL and bytes
/// that are not part of well-formed UTF-8 are written as \xNN; everything
/// else, UTF-8 included, is kept.
std::string printable_key(std::string_view text);

/// Throws UsageError unless every key in `fqn` (escaped link names joined by
/// '/') can be stored and read back as the same key: valid UTF-8 and no NUL
/// byte. HDF5 link names are C strings (a NUL would cut the key short) in
/// the UTF-8 character set, and a torch.save file's keys are Python str, so
/// such a key could be written but not read back or converted. The message
/// names the key as printable_key() writes it, followed by `where` (e.g.
/// " on rank 3").
void require_storable_key(std::string_view fqn, std::string_view where = {});

/// The number of keys in `fqn` (escaped link names joined by '/').
std::size_t key_depth(std::string_view fqn);

/// Throws UsageError when the container `fqn` nests kMaxContainerDepth or
/// more containers deep, which the reader would refuse; `where` as above.
void require_readable_depth(std::string_view container_fqn, std::string_view where = {});

}  // namespace h5dcp::detail
