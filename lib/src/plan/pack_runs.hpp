#pragma once
// Which elements of a pack (format 1.2) one read takes: the range asked for,
// extended over the ranges announced next to it. A load of thousands of
// packed tensors then costs a few reads of a pack rather than one each (an
// HDF5 read costs its dataspace selection and call; for 16 KiB tensors that,
// not their bytes, is the load's time). Pure: hdf5/container_reader keeps the
// announced ranges and the bytes of the last run.

#include <cstdint>
#include <vector>

namespace h5dcp::detail {

/// Elements [first, first + count) of one pack.
struct ElementRange {
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::int64_t end() const { return first + count; }
};

/// A run read at once: at most this many bytes...
inline constexpr std::int64_t kPackRunMaxBytes = std::int64_t{8} << 20;
/// ... joining announced ranges at most this many bytes apart (the largest
/// packed tensor: a gap that size is read rather than cut the run).
inline constexpr std::int64_t kPackRunGapBytes = std::int64_t{64} << 10;

/// Sorts `announced` by first element (the order runs are looked up in).
void sort_ranges(std::vector<ElementRange>& announced);

/// The run to read for `request`: the request itself, extended over the
/// announced ranges (sorted, sort_ranges) that start at or after it, each at
/// most `gap` elements past the run so far, while the run stays within
/// `max_elements` (never shorter than the request).
ElementRange pack_run(const std::vector<ElementRange>& announced, ElementRange request, std::int64_t gap,
                      std::int64_t max_elements);

}  // namespace h5dcp::detail
