#pragma once
// Which elements of a pack (format 1.2) one read takes: the range asked for,
// extended over the ranges announced next to it. A load of thousands of
// packed tensors then costs a few reads of a pack rather than one each (an
// HDF5 read costs its dataspace selection and call; for 16 KiB tensors that,
// not their bytes, is the load's time). When the load says where each
// range goes, the run is read straight there, its gaps into scratch
// (scatter_pieces): no copy. Pure: hdf5/container_reader keeps the
// announced ranges and the last run.

#include <cstdint>
#include <vector>

namespace h5dcp::detail {

/// Elements [first, first + count) of one pack, and where a load reads
/// them when it said so (opaque here; nullptr: not said, or a gap).
struct ElementRange {
  std::int64_t first = 0;
  std::int64_t count = 0;
  void* into = nullptr;
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

/// `run` (from pack_run) as pieces read straight into place: the announced
/// ranges inside it, in order, each with its `into`, and the gaps between
/// them (`into` nullptr), together exactly the run. Empty when that cannot
/// be: a range without a place, two that overlap (one tensor loaded into
/// two places), one that sticks out of the run, or two places that share
/// memory (tied tensors: read in turn, each is checked before the next is
/// read over it); the run is then read into a buffer and copied out.
/// `element_bytes`: the size of one element, for the places' extents.
std::vector<ElementRange> scatter_pieces(const std::vector<ElementRange>& announced, ElementRange run,
                                         std::int64_t element_bytes);

}  // namespace h5dcp::detail
