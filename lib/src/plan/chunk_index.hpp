#pragma once
// Which saved chunks of one tensor a block overlaps, without scanning them
// all.
//
// Load planning asks, for every block every rank wants, which saved chunks
// intersect it. The naive loop over all chunks per block costs
// ranks x blocks x chunks per tensor: with 1,024 ranks saving and 1,024
// loading that is ~10^6 box tests per tensor and ~10^9 for a model, which is
// what made PyTorch DCP's load planning a bottleneck at scale
// (pytorch/pytorch#169113). ChunkIndex sorts the chunks once per dimension
// and answers each query from a binary-searched window: O(D log n + w) per
// query, w being the chunks in the window. For row and column shardings and
// for row or column blocks of a grid, w is the number of overlaps; for a
// small block of a g x g grid it is one row of cells, g = sqrt(n).

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "h5dcp/metadata.hpp"

namespace h5dcp::detail {

/// One saved chunk a query block intersects.
struct ChunkOverlap {
  std::size_t chunk = 0;              ///< index into the chunks the index was built from
  ChunkStorageMetadata intersection;  ///< chunk ∩ query, in global coordinates

  friend bool operator==(const ChunkOverlap& a, const ChunkOverlap& b) {
    return a.chunk == b.chunk && a.intersection == b.intersection;
  }
};

/// An immutable spatial index over the saved chunks of one tensor.
///
/// For every dimension d it keeps the non-empty chunks sorted by their start
/// along d, with the running maximum of their ends. The chunks that can meet
/// a query [qs, qe) along d then form one window of that order: those
/// starting before qe (a binary search on the starts) and not all ending by
/// qs (a binary search on the running maximum, which never decreases). A
/// query takes the dimension with the smallest window and tests only the
/// chunks in it. For a row sharding that is the row dimension, for a column
/// sharding the column one, for a grid whichever the block is thinner in;
/// uneven cuts only shift the windows. Shapes of the tiling that defeat all
/// dimensions at once (e.g. a chunk spanning a whole dimension next to many
/// thin ones) make the window larger than the answer, never the answer wrong.
class ChunkIndex {
 public:
  /// Builds the index of `chunks`, which tile one tensor's global shape
  /// (the usual case; overlapping chunks are answered correctly too). All
  /// must have the same rank; 0-d tensors have one chunk with empty offsets
  /// and sizes. Chunks with zero volume never overlap anything. Throws
  /// UsageError when a chunk's offsets and sizes, or two chunks, disagree on
  /// the rank. O(D n log n) time, O(D^2 n) memory.
  explicit ChunkIndex(const std::vector<ChunkStorageMetadata>& chunks);

  /// Every chunk that intersects `box` (of the chunks' rank), with the
  /// intersection, sorted by chunk index. Empty when `box` has zero volume.
  /// Throws UsageError when `box` has another rank than the chunks.
  std::vector<ChunkOverlap> overlaps(const ChunkStorageMetadata& box) const;

  /// The same answer, written into `out` (whose contents it replaces). It
  /// reuses out's elements and the storage of their boxes, so a loop over
  /// many queries with one `out` allocates almost nothing: at 1,024 ranks
  /// the allocations of fresh answers cost more than the search.
  void overlaps(const ChunkStorageMetadata& box, std::vector<ChunkOverlap>& out) const;

  /// What load planning needs of the same answer, without the boxes: the
  /// indices of the chunks that intersect `box`, sorted, written into
  /// `chunks` (whose contents it replaces), and the elements of `box` their
  /// intersections hold, added up (the box's volume when the chunks tile it
  /// once). A planner checks that sum and reads from those chunks; making an
  /// intersection box per overlap (two vectors each) and walking them again
  /// for their volumes cost it more than the search at 1,024 ranks. Throws
  /// UsageError when `box` has another rank than the chunks, or when the sum
  /// does not fit 64 bits.
  std::int64_t overlapping_chunks(const ChunkStorageMetadata& box, std::vector<std::size_t>& chunks) const;

  /// How many chunks overlaps(box) tests one by one: the size of the window
  /// it searches, at least the number of overlaps (for tests and benchmarks).
  std::size_t candidates(const ChunkStorageMetadata& box) const;

  /// The rank (number of dimensions) of the chunks; 0 when built from none.
  std::size_t dims() const { return dims_; }
  /// How many chunks the index was built from, empty ones included.
  std::size_t size() const { return count_; }

 private:
  /// The chunks of one dimension's order, sorted by their start along it.
  struct Axis {
    std::vector<std::uint32_t> order;    ///< non-empty chunk indices by start
    std::vector<std::int64_t> starts;    ///< their starts along the dimension
    std::vector<std::int64_t> max_ends;  ///< running maximum of their ends
    /// Their bounds in this order: entry k, dimension d at
    /// bounds[2 * (k * dims_ + d)] (start, then end). A copy per dimension
    /// (D^2 n values, not D n): a query scans its window in sequence, where
    /// one shared array indexed by chunk made a column's window of a
    /// row-major grid a cache miss per chunk.
    std::vector<std::int64_t> bounds;
    // starts and max_ends at both ends: most queries of an uncut dimension
    // (every chunk spans it) or at the edge of the tensor need no search.
    std::int64_t first_start = 0;
    std::int64_t last_start = 0;
    std::int64_t first_max_end = 0;
    std::int64_t last_max_end = 0;
  };

  /// [first, last) of `axis.order`: the chunks that may meet [qs, qe).
  static std::pair<std::size_t, std::size_t> window(const Axis& axis, std::int64_t qs, std::int64_t qe);
  /// {dimension, first, last}: the smallest window over all dimensions of a
  /// non-empty box (first == last when nothing meets it).
  std::tuple<std::size_t, std::size_t, std::size_t> smallest_window(const ChunkStorageMetadata& box) const;
  /// Calls on_overlap(chunk, bounds) for every chunk that meets the
  /// non-empty `box` (of the chunks' rank), in the order of the window it
  /// scans; bounds points at the chunk's start and end along every dimension
  /// (start, end, start, end, ...). overlaps() and overlapping_chunks() share
  /// it; a 0-d index passes each non-empty chunk with no bounds.
  template <class OnOverlap>
  void for_each_overlap(const ChunkStorageMetadata& box, OnOverlap&& on_overlap) const;

  std::size_t dims_ = 0;
  std::size_t count_ = 0;
  std::vector<std::uint32_t> non_empty_;  ///< chunks with a non-zero volume
  std::vector<Axis> axes_;                ///< one per dimension
};

}  // namespace h5dcp::detail
