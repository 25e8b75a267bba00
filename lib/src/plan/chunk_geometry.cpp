#include "plan/chunk_geometry.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

// One pass: volume() runs once per overlap a load plans (tens of millions
// at 1,024 ranks), where three passes over the sizes showed in profiles.
std::optional<std::int64_t> checked_volume(const Shape& sizes) {
  std::int64_t n = 1;
  bool zero = false;
  bool overflow = false;
  for (const auto s : sizes) {
    if (s < 0) return std::nullopt;
    if (s == 0)
      zero = true;
    else if (!overflow)
      overflow = __builtin_mul_overflow(n, s, &n);
  }
  // A zero anywhere makes the product 0 even when the other sizes overflow.
  if (zero) return 0;
  if (overflow) return std::nullopt;
  return n;
}

std::optional<std::int64_t> checked_bytes(const Shape& sizes, std::int64_t element_size) {
  const auto n = checked_volume(sizes);
  std::int64_t bytes = 0;
  if (!n || element_size < 0 || __builtin_mul_overflow(*n, element_size, &bytes)) return std::nullopt;
  return bytes;
}

std::int64_t volume(const Shape& sizes) {
  // checked_volume is already one pass; only its refusals need a second look.
  if (const auto n = checked_volume(sizes)) return *n;
  if (std::any_of(sizes.begin(), sizes.end(), [](std::int64_t s) { return s < 0; }))  // as before: plain product
    return std::accumulate(sizes.begin(), sizes.end(), std::int64_t{1}, std::multiplies<>());
  throw UsageError("h5dcp: the shape " + describe_shape(sizes) + " has more elements than 64 bits count");
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size(), 1);
  for (std::size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<std::int64_t>(sizes[d], 1);
  return strides;
}

std::int64_t linear_offset(const Shape& at, const Shape& strides) {
  std::int64_t offset = 0;
  for (std::size_t d = 0; d < at.size(); ++d) offset += at[d] * strides[d];
  return offset;
}

bool contains(const ChunkStorageMetadata& outer, const ChunkStorageMetadata& inner) {
  if (outer.offsets.size() != inner.offsets.size()) return false;
  for (std::size_t d = 0; d < outer.offsets.size(); ++d)
    if (inner.offsets[d] < outer.offsets[d] || inner.offsets[d] + inner.sizes[d] > outer.offsets[d] + outer.sizes[d])
      return false;
  return true;
}

bool is_contiguous_in(const ChunkStorageMetadata& box, const Shape& global) {
  if (volume(box.sizes) == 0) return true;
  // From the last dimension back: whole dimensions, then at most one cut
  // one, then only dimensions of size 1.
  std::size_t d = global.size();
  while (d > 0 && box.sizes[d - 1] == global[d - 1]) --d;
  if (d == 0) return true;  // the whole array
  --d;                      // the cut dimension: any size
  while (d > 0 && box.sizes[d - 1] == 1) --d;
  return d == 0;
}

std::optional<ChunkStorageMetadata> intersect(const ChunkStorageMetadata& a, const ChunkStorageMetadata& b) {
  ChunkStorageMetadata out;
  for (std::size_t d = 0; d < a.offsets.size(); ++d) {
    const auto lo = std::max(a.offsets[d], b.offsets[d]);
    const auto hi = std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d]);
    if (hi <= lo) return std::nullopt;
    out.offsets.push_back(lo);
    out.sizes.push_back(hi - lo);
  }
  return out;
}

Shape minus(const Shape& a, const Shape& b) {
  Shape out(a.size());
  for (std::size_t d = 0; d < a.size(); ++d) out[d] = a[d] - b[d];
  return out;
}

std::string describe_box(const ChunkStorageMetadata& box) {
  std::ostringstream out;
  out << "[";
  for (std::size_t d = 0; d < box.offsets.size(); ++d) {
    out << (d ? ", " : "") << box.offsets[d] << ":";
    std::int64_t end = 0;  // a damaged file's box may not even have an end
    if (__builtin_add_overflow(box.offsets[d], box.sizes[d], &end))
      out << box.offsets[d] << "+" << box.sizes[d];
    else
      out << end;
  }
  out << "]";
  return out.str();
}

std::string describe_shape(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (std::size_t d = 0; d < shape.size(); ++d) out << (d ? ", " : "") << shape[d];
  out << "]";
  return out.str();
}

namespace {

// Box tests spent looking for an uncovered element to name (about 0.1 s).
constexpr double kMaxUncoveredSearch = 1e8;

}  // namespace

std::vector<std::int64_t> flat_bounds(const std::vector<ChunkStorageMetadata>& chunks, std::size_t dims) {
  std::vector<std::int64_t> bounds(2 * chunks.size() * dims);
  for (std::size_t i = 0; i < chunks.size(); ++i)
    for (std::size_t d = 0; d < dims; ++d) {
      bounds[2 * (i * dims + d)] = chunks[i].offsets[d];
      bounds[2 * (i * dims + d) + 1] = chunks[i].offsets[d] + chunks[i].sizes[d];
    }
  return bounds;
}

// The first overlapping pair, if any. A sweep along the dimension with the
// most distinct start offsets keeps this near O(n log n) for the usual
// shardings (rows, columns, grids) instead of comparing all pairs. It works
// on a flat copy of the bounds and an order of indices: the save planner and
// every load run it on each tensor's chunks (1,024 per tensor at 1,024
// ranks), and copying, sorting and intersecting the boxes themselves cost an
// allocation per chunk and per tested pair.
std::optional<std::string> find_overlap(const std::string& fqn, const std::vector<ChunkStorageMetadata>& chunks) {
  if (chunks.size() < 2 || chunks.front().offsets.empty()) return std::nullopt;
  const std::size_t dims = chunks.front().offsets.size();
  const std::size_t n = chunks.size();
  const std::vector<std::int64_t> bounds = flat_bounds(chunks, dims);
  std::vector<std::size_t> order;
  order.reserve(n);
  for (std::size_t i = 0; i < n; ++i)  // an empty chunk overlaps nothing
    if (std::none_of(chunks[i].sizes.begin(), chunks[i].sizes.end(), [](std::int64_t s) { return s == 0; }))
      order.push_back(i);
  const auto lo = [&](std::size_t i, std::size_t d) { return bounds[2 * (i * dims + d)]; };
  const auto hi = [&](std::size_t i, std::size_t d) { return bounds[2 * (i * dims + d) + 1]; };

  std::size_t sweep = 0;
  std::size_t best = 0;
  std::vector<std::int64_t> starts(order.size());
  for (std::size_t d = 0; d < dims; ++d) {
    for (std::size_t k = 0; k < order.size(); ++k) starts[k] = lo(order[k], d);
    std::sort(starts.begin(), starts.end());
    const auto distinct = static_cast<std::size_t>(std::unique(starts.begin(), starts.end()) - starts.begin());
    if (distinct > best) {
      best = distinct;
      sweep = d;
    }
  }
  // By start along the sweep, then by offsets, then by ends: the pair named
  // is the same whatever order the chunks were listed in.
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (lo(a, sweep) != lo(b, sweep)) return lo(a, sweep) < lo(b, sweep);
    for (std::size_t d = 0; d < dims; ++d)
      if (lo(a, d) != lo(b, d)) return lo(a, d) < lo(b, d);
    for (std::size_t d = 0; d < dims; ++d)
      if (hi(a, d) != hi(b, d)) return hi(a, d) < hi(b, d);
    return a < b;
  });
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t a = order[k];
    for (std::size_t m = k + 1; m < order.size() && lo(order[m], sweep) < hi(a, sweep); ++m) {
      const std::size_t b = order[m];
      bool meet = true;
      for (std::size_t d = 0; meet && d < dims; ++d) meet = lo(a, d) < hi(b, d) && lo(b, d) < hi(a, d);
      if (meet)
        return "shards of '" + fqn + "' overlap: " + describe_box(chunks[a]) + " and " + describe_box(chunks[b]);
    }
  }
  return std::nullopt;
}

namespace {

// One element no chunk covers, found on the grid of chunk boundaries; nullopt
// when the grid is too large to walk (the message then gives counts only).
std::optional<Shape> find_uncovered(const Shape& global, const std::vector<ChunkStorageMetadata>& chunks) {
  std::vector<std::vector<std::int64_t>> cuts(global.size());
  double cells = 1;
  for (std::size_t d = 0; d < global.size(); ++d) {
    std::set<std::int64_t> b{0};
    for (const auto& c : chunks) {
      b.insert(c.offsets[d]);
      if (c.offsets[d] + c.sizes[d] < global[d]) b.insert(c.offsets[d] + c.sizes[d]);
    }
    cuts[d].assign(b.begin(), b.end());
    cells *= static_cast<double>(cuts[d].size());
  }
  // Each grid point is tested against every chunk: bound the whole walk, so
  // that a file listing thousands of chunks cannot make an error message slow.
  if (cells > 1e6 || cells * static_cast<double>(chunks.size()) > kMaxUncoveredSearch) return std::nullopt;
  std::vector<std::size_t> idx(global.size(), 0);
  while (true) {
    Shape point(global.size());
    for (std::size_t d = 0; d < global.size(); ++d) point[d] = cuts[d][idx[d]];
    const bool covered = std::any_of(chunks.begin(), chunks.end(), [&](const auto& c) {
      for (std::size_t d = 0; d < point.size(); ++d)
        if (point[d] < c.offsets[d] || point[d] >= c.offsets[d] + c.sizes[d]) return false;
      return true;
    });
    if (!covered) return point;
    std::size_t d = 0;
    while (d < idx.size() && ++idx[d] == cuts[d].size()) idx[d++] = 0;
    if (d == idx.size()) return std::nullopt;
  }
}

}  // namespace

std::optional<std::string> tiling_problem(const std::string& fqn, const Shape& global,
                                          const std::vector<ChunkStorageMetadata>& chunks) {
  if (auto overlap = find_overlap(fqn, chunks)) return overlap;
  // No overlap and every chunk inside: the volumes add up to at most the total.
  std::int64_t covered = 0;
  for (const auto& c : chunks) covered += volume(c.sizes);
  const auto total = volume(global);
  if (covered == total) return std::nullopt;
  std::ostringstream msg;
  msg << "shards of '" << fqn << "' cover " << covered << " of the " << total << " elements of its global shape "
      << describe_shape(global);
  if (const auto point = find_uncovered(global, chunks)) msg << "; no shard holds element " << describe_shape(*point);
  return msg.str();
}

void check_exact_tiling(const std::string& fqn, const Shape& global, const std::vector<ChunkStorageMetadata>& chunks) {
  if (const auto problem = tiling_problem(fqn, global, chunks)) throw UsageError("h5dcp: " + *problem);
}

}  // namespace h5dcp::detail
