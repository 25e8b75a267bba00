#include "plan/chunk_index.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "h5dcp/error.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

namespace {

bool has_rank(const ChunkStorageMetadata& box, std::size_t dims) {
  return box.offsets.size() == dims && box.sizes.size() == dims;
}

// "has 2 offsets and 1 size, not 2" (describe_box needs as many of each).
std::string rank_mismatch(const ChunkStorageMetadata& box, std::size_t dims) {
  return "has " + std::to_string(box.offsets.size()) + (box.offsets.size() == 1 ? " offset" : " offsets") + " and " +
         std::to_string(box.sizes.size()) + (box.sizes.size() == 1 ? " size" : " sizes") + ", not " +
         std::to_string(dims);
}

void check_query_rank(const ChunkStorageMetadata& box, std::size_t dims) {
  if (!has_rank(box, dims)) throw UsageError("h5dcp: a block queried against saved chunks " + rank_mismatch(box, dims));
}

bool is_empty(const ChunkStorageMetadata& box) {
  return std::any_of(box.sizes.begin(), box.sizes.end(), [](std::int64_t s) { return s <= 0; });
}

// {start, size} along dimension d of a chunk that meets `box`: `bounds` is
// the chunk's start and end along every dimension (start, end, ...).
std::pair<std::int64_t, std::int64_t> common_extent(const std::int64_t* bounds, const ChunkStorageMetadata& box,
                                                    std::size_t d) {
  const auto lo = std::max(bounds[2 * d], box.offsets[d]);
  return {lo, std::min(bounds[2 * d + 1], box.offsets[d] + box.sizes[d]) - lo};
}

}  // namespace

ChunkIndex::ChunkIndex(const std::vector<ChunkStorageMetadata>& chunks) : count_(chunks.size()) {
  if (chunks.size() > std::numeric_limits<std::uint32_t>::max())
    throw UsageError("h5dcp: too many chunks to index: " + std::to_string(chunks.size()));
  dims_ = chunks.empty() ? 0 : chunks.front().offsets.size();
  for (std::size_t i = 0; i < chunks.size(); ++i)
    if (!has_rank(chunks[i], dims_))
      throw UsageError("h5dcp: saved chunk " + std::to_string(i) + " " + rank_mismatch(chunks[i], dims_) +
                       " like the first chunk");

  for (std::size_t i = 0; i < chunks.size(); ++i)
    if (!is_empty(chunks[i])) non_empty_.push_back(static_cast<std::uint32_t>(i));
  if (dims_ == 0 || non_empty_.empty()) return;

  const std::vector<std::int64_t> bounds = flat_bounds(chunks, dims_);

  axes_.resize(dims_);
  for (std::size_t d = 0; d < dims_; ++d) {
    Axis& axis = axes_[d];
    const auto start = [&](std::uint32_t i) { return bounds[2 * (i * dims_ + d)]; };
    axis.order = non_empty_;
    std::stable_sort(axis.order.begin(), axis.order.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return start(a) < start(b); });
    axis.starts.reserve(axis.order.size());
    axis.max_ends.reserve(axis.order.size());
    axis.bounds.reserve(axis.order.size() * 2 * dims_);
    std::int64_t max_end = std::numeric_limits<std::int64_t>::min();
    for (const auto i : axis.order) {
      axis.starts.push_back(start(i));
      max_end = std::max(max_end, bounds[2 * (i * dims_ + d) + 1]);
      axis.max_ends.push_back(max_end);
      const auto at = static_cast<std::ptrdiff_t>(2 * std::size_t{i} * dims_);
      axis.bounds.insert(axis.bounds.end(), bounds.begin() + at,
                         bounds.begin() + at + static_cast<std::ptrdiff_t>(2 * dims_));
    }
    axis.first_start = axis.starts.front();
    axis.last_start = axis.starts.back();
    axis.first_max_end = axis.max_ends.front();
    axis.last_max_end = axis.max_ends.back();
  }
}

std::pair<std::size_t, std::size_t> ChunkIndex::window(const Axis& axis, std::int64_t qs, std::int64_t qe) {
  const std::size_t n = axis.order.size();
  // The first chunk whose running maximum end passes qs: before it, every
  // chunk ends by qs.
  std::size_t first = 0;
  if (axis.last_max_end <= qs)
    first = n;
  else if (axis.first_max_end <= qs)
    first = static_cast<std::size_t>(std::upper_bound(axis.max_ends.begin(), axis.max_ends.end(), qs) -
                                     axis.max_ends.begin());
  // The first chunk starting at or after qe: from it on, none can meet.
  std::size_t last = n;
  if (axis.first_start >= qe)
    last = 0;
  else if (axis.last_start >= qe)
    last = static_cast<std::size_t>(std::lower_bound(axis.starts.begin(), axis.starts.end(), qe) - axis.starts.begin());
  return {first, std::max(first, last)};
}

std::tuple<std::size_t, std::size_t, std::size_t> ChunkIndex::smallest_window(const ChunkStorageMetadata& box) const {
  std::size_t best = 0;
  std::size_t best_first = 0;
  std::size_t best_last = std::numeric_limits<std::size_t>::max();
  for (std::size_t d = 0; d < dims_; ++d) {
    const auto [first, last] = window(axes_[d], box.offsets[d], box.offsets[d] + box.sizes[d]);
    if (first == last) return {d, first, last};  // nothing meets the query along d
    if (last - first < best_last - best_first) {
      best = d;
      best_first = first;
      best_last = last;
    }
  }
  return {best, best_first, best_last};
}

std::size_t ChunkIndex::candidates(const ChunkStorageMetadata& box) const {
  check_query_rank(box, dims_);
  if (is_empty(box)) return 0;
  if (dims_ == 0) return non_empty_.size();
  if (non_empty_.empty()) return 0;
  const auto [axis, first, last] = smallest_window(box);
  return last - first;
}

template <class OnOverlap>
void ChunkIndex::for_each_overlap(const ChunkStorageMetadata& box, OnOverlap&& on_overlap) const {
  if (dims_ == 0) {
    for (const auto i : non_empty_) on_overlap(std::size_t{i}, static_cast<const std::int64_t*>(nullptr));
    return;
  }
  if (non_empty_.empty()) return;
  const auto [best, first, last] = smallest_window(box);
  const Axis& axis = axes_[best];
  // The window's bounds lie side by side in the axis's order, so the scan
  // reads memory in sequence.
  const std::int64_t* b = axis.bounds.data() + 2 * first * dims_;
  for (std::size_t k = first; k < last; ++k, b += 2 * dims_) {
    bool meets = true;
    for (std::size_t d = 0; meets && d < dims_; ++d)
      meets = b[2 * d] < box.offsets[d] + box.sizes[d] && box.offsets[d] < b[2 * d + 1];
    if (meets) on_overlap(std::size_t{axis.order[k]}, b);
  }
}

std::vector<ChunkOverlap> ChunkIndex::overlaps(const ChunkStorageMetadata& box) const {
  std::vector<ChunkOverlap> out;
  overlaps(box, out);
  return out;
}

void ChunkIndex::overlaps(const ChunkStorageMetadata& box, std::vector<ChunkOverlap>& out) const {
  check_query_rank(box, dims_);
  std::size_t found = 0;
  if (!is_empty(box)) {
    // Each overlap's intersection is written as it is found, into out's
    // next element and the storage of its box where out has them
    // (intersect() returns a new box, grown element by element, and
    // allocating it made queries twice as slow at 1,024 ranks).
    for_each_overlap(box, [&](std::size_t chunk, const std::int64_t* b) {
      if (found == out.size()) out.emplace_back();
      auto& o = out[found++];
      o.chunk = chunk;
      o.intersection.offsets.resize(dims_);
      o.intersection.sizes.resize(dims_);
      for (std::size_t d = 0; d < dims_; ++d)
        std::tie(o.intersection.offsets[d], o.intersection.sizes[d]) = common_extent(b, box, d);
    });
  }
  out.resize(found);

  // The window is in start order along one dimension; the answer is in chunk
  // order, which is usually the same (chunks listed by rank, ranks in order).
  const auto by_chunk = [](const ChunkOverlap& a, const ChunkOverlap& b) { return a.chunk < b.chunk; };
  if (!std::is_sorted(out.begin(), out.end(), by_chunk)) std::sort(out.begin(), out.end(), by_chunk);
}

std::int64_t ChunkIndex::overlapping_chunks(const ChunkStorageMetadata& box, std::vector<std::size_t>& chunks) const {
  check_query_rank(box, dims_);
  chunks.clear();
  if (is_empty(box)) return 0;
  std::int64_t covered = 0;
  bool overflow = false;
  for_each_overlap(box, [&](std::size_t chunk, const std::int64_t* b) {
    chunks.push_back(chunk);
    // The intersection's volume: every side is positive (both boxes are
    // non-empty and meet along every dimension).
    std::int64_t n = 1;
    for (std::size_t d = 0; d < dims_; ++d) overflow |= __builtin_mul_overflow(n, common_extent(b, box, d).second, &n);
    overflow |= __builtin_add_overflow(covered, n, &covered);
  });
  if (overflow)
    throw UsageError("h5dcp: the saved chunks that meet the block " + describe_box(box) +
                     " hold more elements than 64 bits count");
  if (!std::is_sorted(chunks.begin(), chunks.end())) std::sort(chunks.begin(), chunks.end());
  return covered;
}

}  // namespace h5dcp::detail
