#include "plan/chunk_geometry.hpp"

#include <algorithm>
#include <numeric>
#include <set>
#include <sstream>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

std::optional<std::int64_t> checked_volume(const Shape& sizes) {
  if (std::any_of(sizes.begin(), sizes.end(), [](std::int64_t s) { return s < 0; })) return std::nullopt;
  // A zero anywhere makes the product 0 even when the other sizes overflow.
  if (std::any_of(sizes.begin(), sizes.end(), [](std::int64_t s) { return s == 0; })) return 0;
  std::int64_t n = 1;
  for (const auto s : sizes)
    if (__builtin_mul_overflow(n, s, &n)) return std::nullopt;
  return n;
}

std::optional<std::int64_t> checked_bytes(const Shape& sizes, std::int64_t element_size) {
  const auto n = checked_volume(sizes);
  std::int64_t bytes = 0;
  if (!n || element_size < 0 || __builtin_mul_overflow(*n, element_size, &bytes)) return std::nullopt;
  return bytes;
}

std::int64_t volume(const Shape& sizes) {
  if (std::any_of(sizes.begin(), sizes.end(), [](std::int64_t s) { return s < 0; }))  // as before: plain product
    return std::accumulate(sizes.begin(), sizes.end(), std::int64_t{1}, std::multiplies<>());
  const auto n = checked_volume(sizes);
  if (!n) throw UsageError("h5dcp: the shape " + describe_shape(sizes) + " has more elements than 64 bits count");
  return *n;
}

Shape contiguous_strides(const Shape& sizes) {
  Shape strides(sizes.size(), 1);
  for (std::size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<std::int64_t>(sizes[d], 1);
  return strides;
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

// The first overlapping pair, if any. A sweep along the dimension with the
// most distinct start offsets keeps this near O(n log n) for the usual
// shardings (rows, columns, grids) instead of comparing all pairs.
}  // namespace

std::optional<std::string> find_overlap(const std::string& fqn, std::vector<ChunkStorageMetadata> chunks) {
  if (chunks.size() < 2 || chunks.front().offsets.empty()) return std::nullopt;
  const std::size_t dims = chunks.front().offsets.size();
  std::size_t sweep = 0;
  std::size_t best = 0;
  for (std::size_t d = 0; d < dims; ++d) {
    std::set<std::int64_t> starts;
    for (const auto& c : chunks) starts.insert(c.offsets[d]);
    if (starts.size() > best) {
      best = starts.size();
      sweep = d;
    }
  }
  std::sort(chunks.begin(), chunks.end(), [sweep](const auto& a, const auto& b) {
    return a.offsets[sweep] != b.offsets[sweep] ? a.offsets[sweep] < b.offsets[sweep] : a.offsets < b.offsets;
  });
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const auto end = chunks[i].offsets[sweep] + chunks[i].sizes[sweep];
    for (std::size_t j = i + 1; j < chunks.size() && chunks[j].offsets[sweep] < end; ++j) {
      if (volume(chunks[i].sizes) == 0 || volume(chunks[j].sizes) == 0) continue;
      if (intersect(chunks[i], chunks[j]))
        return "shards of '" + fqn + "' overlap: " + describe_box(chunks[i]) + " and " + describe_box(chunks[j]);
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
