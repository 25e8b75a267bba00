#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "h5dcp/error.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/chunk_index.hpp"

namespace h5dcp::detail {

// gtest prints ChunkOverlaps through this (found by argument-dependent lookup).
void PrintTo(const ChunkOverlap& o, std::ostream* os) {
  *os << "{" << o.chunk << ", " << describe_box(o.intersection) << "}";
}

namespace {

using Boxes = std::vector<ChunkStorageMetadata>;
using Rng = std::mt19937_64;

std::int64_t uniform(Rng& rng, std::int64_t lo, std::int64_t hi) {  // inclusive
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
}

// The reference: every chunk, tested one by one.
std::vector<ChunkOverlap> brute_force(const Boxes& chunks, const ChunkStorageMetadata& box) {
  std::vector<ChunkOverlap> out;
  for (std::size_t i = 0; i < chunks.size(); ++i)
    if (auto common = intersect(chunks[i], box)) out.push_back({i, *common});
  return out;
}

// Boundaries 0 = c[0] <= c[1] <= ... <= c[parts] = extent, unevenly spaced.
// Without `allow_empty` every part is at least 1 wide (parts is capped).
Shape cuts(Rng& rng, std::int64_t extent, std::int64_t parts, bool allow_empty) {
  if (!allow_empty) parts = std::min(parts, extent);
  Shape inner;
  if (allow_empty) {
    for (std::int64_t p = 1; p < parts; ++p) inner.push_back(uniform(rng, 0, extent));
  } else {
    Shape pool;  // distinct interior points
    for (std::int64_t x = 1; x < extent; ++x) pool.push_back(x);
    std::shuffle(pool.begin(), pool.end(), rng);
    inner.assign(pool.begin(), pool.begin() + (parts - 1));
  }
  std::sort(inner.begin(), inner.end());
  Shape out{0};
  out.insert(out.end(), inner.begin(), inner.end());
  out.push_back(extent);
  return out;
}

// A grid tiling: the cuts of every dimension and the boxes between them.
struct Grid {
  std::vector<Shape> cuts;
  Boxes chunks;
};

// The grid of `parts[d]` uneven slabs per dimension, its chunks in shuffled
// order.
Grid make_grid(Rng& rng, const Shape& global, const Shape& parts, bool allow_empty) {
  Grid g;
  for (std::size_t d = 0; d < global.size(); ++d) g.cuts.push_back(cuts(rng, global[d], parts[d], allow_empty));
  std::vector<std::size_t> idx(global.size(), 0);
  while (true) {
    ChunkStorageMetadata box;
    for (std::size_t d = 0; d < global.size(); ++d) {
      box.offsets.push_back(g.cuts[d][idx[d]]);
      box.sizes.push_back(g.cuts[d][idx[d] + 1] - g.cuts[d][idx[d]]);
    }
    g.chunks.push_back(box);
    std::size_t d = 0;
    while (d < idx.size() && ++idx[d] == g.cuts[d].size() - 1) idx[d++] = 0;
    if (d == idx.size()) break;
  }
  std::shuffle(g.chunks.begin(), g.chunks.end(), rng);
  return g;
}

Boxes grid(Rng& rng, const Shape& global, const Shape& parts, bool allow_empty) {
  return make_grid(rng, global, parts, allow_empty).chunks;
}

// How many chunks of a grid ChunkIndex should test for a non-empty query:
// along the best dimension d, the chunks of every non-empty slab of d that
// meets the query (the slabs of the other dimensions all count).
std::size_t expected_candidates(const Grid& g, const ChunkStorageMetadata& q) {
  std::size_t best = std::numeric_limits<std::size_t>::max();
  for (std::size_t d = 0; d < g.cuts.size(); ++d) {
    std::size_t window = 1;
    for (std::size_t e = 0; e < g.cuts.size(); ++e) {
      std::size_t slabs = 0;
      for (std::size_t k = 0; k + 1 < g.cuts[e].size(); ++k) {
        const auto lo = g.cuts[e][k];
        const auto hi = g.cuts[e][k + 1];
        if (lo < hi && (e != d || (lo < q.offsets[e] + q.sizes[e] && q.offsets[e] < hi))) ++slabs;
      }
      window *= slabs;
    }
    best = std::min(best, window);
  }
  return best;
}

// An irregular (non-grid) tiling: boxes split at random places along random
// dimensions, like a k-d tree's leaves.
Boxes guillotine(Rng& rng, const Shape& global, std::size_t target) {
  Boxes out{ChunkStorageMetadata{Shape(global.size(), 0), global}};
  for (int tries = 0; out.size() < target && tries < 1000; ++tries) {
    const auto i = static_cast<std::size_t>(uniform(rng, 0, static_cast<std::int64_t>(out.size()) - 1));
    const auto d = static_cast<std::size_t>(uniform(rng, 0, static_cast<std::int64_t>(global.size()) - 1));
    if (out[i].sizes[d] < 2) continue;
    auto right = out[i];
    const auto cut = uniform(rng, 1, out[i].sizes[d] - 1);
    out[i].sizes[d] = cut;
    right.offsets[d] += cut;
    right.sizes[d] -= cut;
    out.push_back(right);
  }
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

// Zero-volume chunks at random places inside `global`, mixed into `chunks`.
void add_empty_chunks(Rng& rng, const Shape& global, Boxes& chunks, int count) {
  for (int n = 0; n < count; ++n) {
    ChunkStorageMetadata box;
    const auto flat = static_cast<std::size_t>(uniform(rng, 0, static_cast<std::int64_t>(global.size()) - 1));
    for (std::size_t d = 0; d < global.size(); ++d) {
      const auto lo = uniform(rng, 0, global[d]);
      box.offsets.push_back(lo);
      box.sizes.push_back(d == flat ? 0 : uniform(rng, 0, global[d] - lo));
    }
    chunks.insert(chunks.begin() + uniform(rng, 0, static_cast<std::int64_t>(chunks.size())), box);
  }
}

// A box inside `global`; its sides are zero now and then.
ChunkStorageMetadata random_box(Rng& rng, const Shape& global) {
  ChunkStorageMetadata box;
  for (const auto extent : global) {
    const auto a = uniform(rng, 0, extent);
    const auto b = uniform(rng, 0, extent);
    box.offsets.push_back(std::min(a, b));
    box.sizes.push_back(std::max(a, b) - std::min(a, b));
  }
  return box;
}

// Checks ChunkIndex against the brute force for `count` random queries, the
// chunks themselves, the blocks of another random tiling (a load sharding)
// and the whole tensor.
void expect_matches_brute_force(Rng& rng, const Shape& global, const Boxes& chunks, int count,
                                const Grid* grid_of_chunks = nullptr) {
  ASSERT_NO_THROW(check_exact_tiling("t", global, chunks)) << "the generator made a bad tiling";
  const ChunkIndex index(chunks);
  ASSERT_EQ(index.size(), chunks.size());
  ASSERT_EQ(index.dims(), global.size());

  Boxes queries{ChunkStorageMetadata{Shape(global.size(), 0), global}};
  for (int n = 0; n < count; ++n) queries.push_back(random_box(rng, global));
  queries.insert(queries.end(), chunks.begin(), chunks.end());
  Shape parts;
  for (const auto extent : global) parts.push_back(uniform(rng, 1, std::max<std::int64_t>(1, extent / 2)));
  for (const auto& block : grid(rng, global, parts, false)) queries.push_back(block);

  // One answer vector reused by every query, starting with junk in it.
  std::vector<ChunkOverlap> reused(3, ChunkOverlap{7, {{1, 2, 3, 4}, {5}}});
  std::vector<std::size_t> reused_chunks{9, 9, 9, 9};
  for (const auto& q : queries) {
    const auto got = index.overlaps(q);
    ASSERT_EQ(got, brute_force(chunks, q)) << "query " << describe_box(q) << " of " << describe_shape(global);
    index.overlaps(q, reused);
    ASSERT_EQ(reused, got) << "query " << describe_box(q) << " of " << describe_shape(global);
    // Not a scan of every chunk: a grid's window is exactly its slabs that
    // meet the query along the best dimension.
    const auto tested = index.candidates(q);
    ASSERT_GE(tested, got.size()) << "query " << describe_box(q);
    if (grid_of_chunks != nullptr && volume(q.sizes) > 0) {
      ASSERT_EQ(tested, expected_candidates(*grid_of_chunks, q)) << "query " << describe_box(q);
    }
    std::int64_t covered = 0;
    for (const auto& o : got) covered += volume(o.intersection.sizes);
    // The chunks tile the tensor: their pieces cover the query exactly.
    ASSERT_EQ(covered, volume(q.sizes)) << "query " << describe_box(q);
    // Load planning's lean lookup: the same chunks and the same sum, no boxes.
    std::vector<std::size_t> want_chunks;
    for (const auto& o : got) want_chunks.push_back(o.chunk);
    ASSERT_EQ(index.overlapping_chunks(q, reused_chunks), covered) << "query " << describe_box(q);
    ASSERT_EQ(reused_chunks, want_chunks) << "query " << describe_box(q);
  }
}

Shape random_shape(Rng& rng, std::size_t dims, std::int64_t max_extent) {
  Shape s;
  for (std::size_t d = 0; d < dims; ++d) s.push_back(uniform(rng, 1, max_extent));
  return s;
}

TEST(ChunkIndex, ReadsTheRightPiecesOfRowShards) {
  // [8, 4] saved as rows 0:3 and 3:8 (listed in reverse); the block rows 2:5, columns 1:3.
  const ChunkIndex index({{{3, 0}, {5, 4}}, {{0, 0}, {3, 4}}});
  const std::vector<ChunkOverlap> want{{0, {{3, 1}, {2, 2}}}, {1, {{2, 1}, {1, 2}}}};
  EXPECT_EQ(index.overlaps({{2, 1}, {3, 2}}), want);
  EXPECT_EQ(index.overlaps({{0, 0}, {3, 4}}), (std::vector<ChunkOverlap>{{1, {{0, 0}, {3, 4}}}}));
  EXPECT_TRUE(index.overlaps({{2, 1}, {3, 0}}).empty());
}

TEST(ChunkIndex, MatchesBruteForceOnRowShardings) {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(seed);
    const auto global = random_shape(rng, 2, 64);
    const auto g = make_grid(rng, global, {uniform(rng, 1, 40), 1}, false);
    expect_matches_brute_force(rng, global, g.chunks, 40, &g);
    if (HasFatalFailure()) return;
  }
}

TEST(ChunkIndex, MatchesBruteForceOnColumnShardings) {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(1000 + seed);
    const auto global = random_shape(rng, 2, 64);
    const auto g = make_grid(rng, global, {1, uniform(rng, 1, 40)}, false);
    expect_matches_brute_force(rng, global, g.chunks, 40, &g);
    if (HasFatalFailure()) return;
  }
}

TEST(ChunkIndex, MatchesBruteForceOnUneven2DGrids) {
  for (std::uint64_t seed = 0; seed < 80; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(2000 + seed);
    const auto global = random_shape(rng, 2, 48);
    const auto g = make_grid(rng, global, {uniform(rng, 1, 12), uniform(rng, 1, 12)}, false);
    expect_matches_brute_force(rng, global, g.chunks, 60, &g);
    if (HasFatalFailure()) return;
  }
}

TEST(ChunkIndex, MatchesBruteForceOn3DGrids) {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(3000 + seed);
    const auto global = random_shape(rng, 3, 16);
    const Shape parts{uniform(rng, 1, 5), uniform(rng, 1, 5), uniform(rng, 1, 5)};
    const auto g = make_grid(rng, global, parts, false);
    expect_matches_brute_force(rng, global, g.chunks, 60, &g);
    if (HasFatalFailure()) return;
  }
}

TEST(ChunkIndex, MatchesBruteForceOn1DShardings) {
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(4000 + seed);
    const auto global = random_shape(rng, 1, 200);
    const auto g = make_grid(rng, global, {uniform(rng, 1, 50)}, false);
    expect_matches_brute_force(rng, global, g.chunks, 60, &g);
    if (HasFatalFailure()) return;
  }
}

TEST(ChunkIndex, MatchesBruteForceOnIrregularTilings) {
  for (std::uint64_t seed = 0; seed < 80; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(5000 + seed);
    const auto dims = static_cast<std::size_t>(uniform(rng, 1, 4));
    const auto global = random_shape(rng, dims, dims >= 3 ? 10 : 40);
    expect_matches_brute_force(rng, global, guillotine(rng, global, static_cast<std::size_t>(uniform(rng, 1, 60))), 60);
    if (HasFatalFailure()) return;
  }
}

TEST(ChunkIndex, ChunksWithZeroVolumeNeverOverlap) {
  for (std::uint64_t seed = 0; seed < 80; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Rng rng(6000 + seed);
    const auto dims = static_cast<std::size_t>(uniform(rng, 1, 3));
    const auto global = random_shape(rng, dims, 20);
    Shape parts;
    for (std::size_t d = 0; d < dims; ++d) parts.push_back(uniform(rng, 1, 8));
    const auto g = make_grid(rng, global, parts, true);  // repeated cuts: empty slabs
    auto chunks = g.chunks;
    add_empty_chunks(rng, global, chunks, static_cast<int>(uniform(rng, 1, 5)));
    expect_matches_brute_force(rng, global, chunks, 60, &g);  // empty chunks are never tested
    if (HasFatalFailure()) return;
  }
}

TEST(ChunkIndex, EmptyDimensionsOfTheTensor) {
  // A [0, 5] tensor: its chunks and every query are empty.
  const ChunkIndex index({{{0, 0}, {0, 3}}, {{0, 3}, {0, 2}}});
  EXPECT_TRUE(index.overlaps({{0, 0}, {0, 5}}).empty());
  EXPECT_TRUE(index.overlaps({{0, 1}, {0, 2}}).empty());
}

TEST(ChunkIndex, ZeroDimensionalTensor) {
  const ChunkIndex index({ChunkStorageMetadata{}});
  EXPECT_EQ(index.dims(), 0u);
  EXPECT_EQ(index.overlaps(ChunkStorageMetadata{}), (std::vector<ChunkOverlap>{{0, ChunkStorageMetadata{}}}));
  EXPECT_EQ(index.overlaps(ChunkStorageMetadata{}), brute_force({ChunkStorageMetadata{}}, ChunkStorageMetadata{}));
  EXPECT_THROW(index.overlaps({{0}, {1}}), UsageError);
  std::vector<ChunkOverlap> reused{{3, {{1, 2}, {3, 4}}}, {4, {}}};
  index.overlaps(ChunkStorageMetadata{}, reused);
  EXPECT_EQ(reused, (std::vector<ChunkOverlap>{{0, ChunkStorageMetadata{}}}));
  // One element, held by the one chunk.
  std::vector<std::size_t> chunks{5, 6};
  EXPECT_EQ(index.overlapping_chunks(ChunkStorageMetadata{}, chunks), 1);
  EXPECT_EQ(chunks, std::vector<std::size_t>{0});
  EXPECT_THROW(index.overlapping_chunks({{0}, {1}}, chunks), UsageError);
}

TEST(ChunkIndex, ZeroVolumeQueriesReturnNothing) {
  const ChunkIndex index({{{0, 0}, {4, 4}}, {{4, 0}, {4, 4}}});
  EXPECT_TRUE(index.overlaps({{2, 0}, {0, 4}}).empty());
  EXPECT_TRUE(index.overlaps({{0, 2}, {8, 0}}).empty());
  EXPECT_TRUE(index.overlaps({{8, 4}, {0, 0}}).empty());
  EXPECT_EQ(index.overlaps({{3, 3}, {2, 1}}).size(), 2u);
  std::vector<ChunkOverlap> reused{{1, {{0, 0}, {1, 1}}}};
  index.overlaps({{2, 0}, {0, 4}}, reused);
  EXPECT_TRUE(reused.empty());
  std::vector<std::size_t> chunks{1};
  EXPECT_EQ(index.overlapping_chunks({{2, 0}, {0, 4}}, chunks), 0);
  EXPECT_TRUE(chunks.empty());
  EXPECT_EQ(index.overlapping_chunks({{3, 3}, {2, 1}}, chunks), 2);
  EXPECT_EQ(chunks, (std::vector<std::size_t>{0, 1}));
  EXPECT_THROW(index.overlapping_chunks({{0}, {1}}, chunks), UsageError);
}

TEST(ChunkIndex, ReusedAnswersAreReplaced) {
  const ChunkIndex index({{{0}, {3}}, {{3}, {5}}});
  std::vector<ChunkOverlap> out;
  index.overlaps({{2}, {2}}, out);
  EXPECT_EQ(out, (std::vector<ChunkOverlap>{{0, {{2}, {1}}}, {1, {{3}, {1}}}}));
  index.overlaps({{4}, {4}}, out);
  EXPECT_EQ(out, (std::vector<ChunkOverlap>{{1, {{4}, {4}}}}));
  index.overlaps({{8}, {0}}, out);
  EXPECT_TRUE(out.empty());
  index.overlaps({{0}, {8}}, out);
  EXPECT_EQ(out, (std::vector<ChunkOverlap>{{0, {{0}, {3}}}, {1, {{3}, {5}}}}));
}

TEST(ChunkIndex, AChunkSpanningADimensionBesideThinOnes) {
  // A full-height column beside many row slabs: every window is wide; the
  // answers must still be exact.
  const Shape global{300, 50};
  Boxes chunks{{{0, 0}, {300, 1}}};
  for (std::int64_t r = 0; r < 300; r += 3) chunks.push_back({{r, 1}, {3, 49}});
  Rng rng(7);
  expect_matches_brute_force(rng, global, chunks, 200);
}

TEST(ChunkIndex, TestsOnlyTheChunksNearTheQuery) {
  // 1,024 row shards of 4 rows: a block of rows 1002:1010 tests 3 chunks.
  Boxes rows;
  for (std::int64_t r = 0; r < 4096; r += 4) rows.push_back({{r, 0}, {4, 1024}});
  const ChunkIndex by_rows(rows);
  EXPECT_EQ(by_rows.candidates({{1002, 64}, {8, 32}}), 3u);
  EXPECT_EQ(by_rows.overlaps({{1002, 64}, {8, 32}}).size(), 3u);

  // A 32 x 32 grid of [128, 32] cells: a column shard or a row shard tests
  // the 32 cells it crosses, a block one row (or column) of cells; never all
  // 1,024.
  Boxes cells;
  for (std::int64_t i = 0; i < 32; ++i)
    for (std::int64_t j = 0; j < 32; ++j) cells.push_back({{i * 128, j * 32}, {128, 32}});
  const ChunkIndex by_cells(cells);
  EXPECT_EQ(by_cells.candidates({{0, 70}, {4096, 1}}), 32u);
  EXPECT_EQ(by_cells.candidates({{300, 0}, {4, 1024}}), 32u);
  EXPECT_EQ(by_cells.candidates({{130, 40}, {100, 20}}), 32u);
  EXPECT_EQ(by_cells.overlaps({{130, 40}, {100, 20}}), (std::vector<ChunkOverlap>{{33, {{130, 40}, {100, 20}}}}));
  EXPECT_EQ(by_cells.overlaps({{0, 70}, {4096, 1}}).size(), 32u);
  EXPECT_EQ(by_cells.candidates({{130, 40}, {0, 20}}), 0u);
}

// Every query [a, b) between the chunks' edges (and one inside each): the
// answer is brute force's and the window holds only the chunks it meets.
void expect_exact_at_every_edge(const Boxes& chunks) {
  const ChunkIndex index(chunks);
  std::vector<std::int64_t> edges;
  for (const auto& c : chunks) {
    edges.push_back(c.offsets[0]);
    edges.push_back(c.offsets[0] + c.sizes[0]);
    edges.push_back(c.offsets[0] + 1);
    edges.push_back(c.offsets[0] + c.sizes[0] - 1);
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  for (std::size_t i = 0; i < edges.size(); ++i) {
    for (std::size_t j = i + 1; j < edges.size(); ++j) {
      const ChunkStorageMetadata q{{edges[i]}, {edges[j] - edges[i]}};
      const auto want = brute_force(chunks, q);
      ASSERT_EQ(index.overlaps(q), want) << "query " << describe_box(q);
      // 1-d chunks that tile: the window is exactly the overlapping chunks.
      ASSERT_EQ(index.candidates(q), want.size()) << "query " << describe_box(q);
    }
  }
}

TEST(ChunkIndex, StartsSpreadUnevenlyOrOverAHugeRangeAreFoundExactly) {
  // Thin chunks packed at the start, then chunks of every width up to 10^15.
  Boxes clustered;
  std::int64_t at = 0;
  for (int k = 0; k < 30; ++k, ++at) clustered.push_back({{at}, {1}});
  for (const std::int64_t width : {7LL, 1000LL, 3LL, 1000000LL, 1LL, 1000000000000000LL, 2LL, 5LL})
    for (int k = 0; k < 3; ++k, at += width) clustered.push_back({{at}, {width}});
  expect_exact_at_every_edge(clustered);
  if (HasFatalFailure()) return;
  // Starts more than 2^62 apart: no arithmetic on the range may overflow.
  Boxes wide;
  at = 0;
  for (int k = 0; k < 20; ++k, ++at) wide.push_back({{at}, {1}});
  wide.push_back({{at}, {std::int64_t{1} << 62}});
  at += std::int64_t{1} << 62;
  for (int k = 0; k < 20; ++k, ++at) wide.push_back({{at}, {1}});
  expect_exact_at_every_edge(wide);
}

TEST(ChunkIndex, RankMismatchesAreRefused) {
  EXPECT_THROW(ChunkIndex({{{0, 0}, {2, 2}}, {{0}, {2}}}), UsageError);
  EXPECT_THROW(ChunkIndex({{{0, 0}, {2}}}), UsageError);
  const ChunkIndex index({{{0, 0}, {2, 2}}});
  EXPECT_THROW(index.overlaps({{0}, {2}}), UsageError);
  EXPECT_THROW(index.overlaps({{0, 0}, {2}}), UsageError);
  EXPECT_THROW(index.candidates({{0}, {2}}), UsageError);
  std::vector<std::size_t> chunks;
  EXPECT_THROW(index.overlapping_chunks({{0, 0}, {2}}, chunks), UsageError);
}

TEST(ChunkIndex, ElementCountsBeyond64BitsAreRefused) {
  // Two chunks that overlap (answered, not refused, by the index) and each
  // hold 2^62 elements: their sum is past what an int64 counts.
  const std::int64_t side = std::int64_t{1} << 31;
  const ChunkIndex index({{{0, 0}, {side, side}}, {{0, 0}, {side, side}}});
  std::vector<std::size_t> chunks;
  EXPECT_EQ(index.overlapping_chunks({{0, 0}, {side, side / 2}}, chunks), std::int64_t{1} << 62);
  EXPECT_THROW(index.overlapping_chunks({{0, 0}, {side, side}}, chunks), UsageError);
}

TEST(ChunkIndex, NoChunks) {
  const ChunkIndex index({});
  EXPECT_EQ(index.size(), 0u);
  EXPECT_TRUE(index.overlaps(ChunkStorageMetadata{}).empty());
}

}  // namespace
}  // namespace h5dcp::detail

namespace h5dcp::detail {
namespace {

// Whether two non-empty chunks overlap, found by testing every pair.
bool any_pair_overlaps(const Boxes& chunks) {
  for (std::size_t i = 0; i < chunks.size(); ++i)
    for (std::size_t j = i + 1; j < chunks.size(); ++j)
      if (volume(chunks[i].sizes) > 0 && volume(chunks[j].sizes) > 0 && intersect(chunks[i], chunks[j])) return true;
  return false;
}

TEST(FindOverlap, AgreesWithEveryPairTestedAndNamesTheSamePairWhateverTheOrder) {
  Rng rng(2026);
  for (int trial = 0; trial < 200; ++trial) {
    const auto dims = static_cast<std::size_t>(uniform(rng, 1, 3));
    const auto global = random_shape(rng, dims, 12);
    auto chunks = guillotine(rng, global, static_cast<std::size_t>(uniform(rng, 2, 30)));
    if (trial % 3 == 0) add_empty_chunks(rng, global, chunks, 3);
    // Every other trial, one more box somewhere: usually an overlap.
    if (trial % 2 == 1) chunks.push_back(random_box(rng, global));
    const auto found = find_overlap("t", chunks);
    ASSERT_EQ(found.has_value(), any_pair_overlaps(chunks)) << "trial " << trial;
    std::shuffle(chunks.begin(), chunks.end(), rng);
    EXPECT_EQ(find_overlap("t", chunks), found) << "trial " << trial;
    if (found) {
      EXPECT_EQ(found->rfind("shards of 't' overlap: [", 0), 0U) << *found;
    }
  }
}

TEST(FindOverlap, NamesTheFirstOverlappingPairAndIgnoresEmptyChunks) {
  const Boxes chunks{{{4}, {4}}, {{2}, {0}}, {{0}, {3}}, {{2}, {3}}};
  EXPECT_EQ(find_overlap("w", chunks), "shards of 'w' overlap: [0:3] and [2:5]");
  EXPECT_EQ(find_overlap("w", Boxes{{{0}, {2}}, {{1}, {0}}, {{2}, {2}}}), std::nullopt);
}

TEST(FlatBounds, GivesEachChunksStartAndEndPerDimensionInChunkOrder) {
  const Boxes chunks{{{0, 2}, {3, 4}}, {{3, 0}, {0, 6}}, {{5, 1}, {2, 1}}};
  EXPECT_EQ(flat_bounds(chunks, 2), (std::vector<std::int64_t>{0, 3, 2, 6, 3, 3, 0, 6, 5, 7, 1, 2}));
  EXPECT_TRUE(flat_bounds(Boxes{{{}, {}}}, 0).empty());
  EXPECT_TRUE(flat_bounds(Boxes{}, 3).empty());
}

}  // namespace
}  // namespace h5dcp::detail
