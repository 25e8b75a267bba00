#pragma once
// What a node-local tier's copy holds, for verify and the CLI.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "h5dcp/metadata.hpp"
#include "h5dcp/verify.hpp"

namespace h5dcp::detail {

/// The summary of the copy at `path` whose index gave `metadata`;
/// std::nullopt when the file is not a local copy. With `owners_out`, also
/// each tensor's chunk owners (hdf5/local_file.hpp). Throws FormatError.
std::optional<LocalCopySummary> local_copy_summary(const std::string& path, const Metadata& metadata,
                                                   std::map<std::string, std::vector<std::int64_t>>* owners_out);

}  // namespace h5dcp::detail
