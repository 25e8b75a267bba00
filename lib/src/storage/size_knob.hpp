#pragma once
// Sizes in MiB set from the environment (H5DCP_WRITEBACK_MIB,
// H5DCP_READAHEAD_MIB): knobs of hints, so a value that is not a count
// falls back to the default instead of failing a save or a load.

#include <cstdint>

namespace h5dcp::detail {

/// The MiB in `variable`, in bytes: `default_mib` when it is unset, empty,
/// not a whole number, negative or above 2^30 MiB; 0 means off.
std::int64_t size_knob_bytes(const char* variable, std::int64_t default_mib) noexcept;

}  // namespace h5dcp::detail
