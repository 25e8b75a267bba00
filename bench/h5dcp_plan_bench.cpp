// h5dcp-plan-bench: how long planning takes at scale: a resharded load's
// chunk lookups, and a save's plans (plan_bench_save.hpp).
//
//   h5dcp-plan-bench [--ranks N] [--tensors M]
//
// Simulates the planning of one load of M tensors saved by N ranks and loaded
// by N ranks with another sharding (defaults: 1,024 ranks, 1,000 tensors):
// for each tensor it builds a ChunkIndex over its saved chunks once, then
// every simulated rank asks which saved chunks its block of every tensor
// overlaps. The naive loop over all chunks would make that N x N box tests
// per tensor (about 10^9 for the defaults; pytorch/pytorch#169113).
//
// The saved shardings have uneven cuts; the loaded ones are cut like
// torch.chunk (the last ranks may get nothing). Each case checks its answers
// against numbers computed another way: the overlap count from the 1-D cuts
// alone, and the total intersected volume, which must equal the volume of
// every tensor (the loaded blocks tile each tensor once). Exits 1 on a
// mismatch. No MPI, no HDF5, no torch: only the planner.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "plan/chunk_geometry.hpp"
#include "plan/chunk_index.hpp"
#include "plan_bench_save.hpp"

namespace {

using h5dcp::ChunkStorageMetadata;
using h5dcp::detail::ChunkIndex;
using h5dcp::detail::Shape;
using Clock = std::chrono::steady_clock;

/// Boundaries 0 = c[0] <= ... <= c[parts] = extent of one dimension.
using Cuts = std::vector<std::int64_t>;

// Cuts near i * extent / parts, each moved by up to a third of a part.
Cuts uneven_cuts(std::int64_t extent, std::int64_t parts, std::mt19937_64& rng) {
  const auto jitter = static_cast<std::int64_t>(static_cast<double>(extent) / static_cast<double>(parts) / 3);
  std::uniform_int_distribution<std::int64_t> move(-jitter, jitter);
  Cuts c{0};
  for (std::int64_t i = 1; i < parts; ++i) {
    const auto base = static_cast<std::int64_t>(
        std::llround(static_cast<double>(i) * static_cast<double>(extent) / static_cast<double>(parts)));
    c.push_back(std::clamp(base + move(rng), c.back(), extent));
  }
  c.push_back(extent);
  return c;
}

// torch.chunk: parts of ceil(extent / parts), the last ones short or empty.
Cuts even_cuts(std::int64_t extent, std::int64_t parts) {
  const auto step = (extent + parts - 1) / parts;
  Cuts c;
  for (std::int64_t i = 0; i <= parts; ++i) c.push_back(std::min(i * step, extent));
  return c;
}

// The blocks of a grid of cuts, one per rank, row-major (rank = i * cols + j).
std::vector<ChunkStorageMetadata> blocks(const Cuts& rows, const Cuts& cols) {
  std::vector<ChunkStorageMetadata> out;
  for (std::size_t i = 0; i + 1 < rows.size(); ++i)
    for (std::size_t j = 0; j + 1 < cols.size(); ++j)
      out.push_back({{rows[i], cols[j]}, {rows[i + 1] - rows[i], cols[j + 1] - cols[j]}});
  return out;
}

// Pairs of non-empty intervals, one of `a` and one of `b`, that overlap: a
// two-pointer merge of two partitions of one dimension.
std::int64_t overlapping_pairs(const Cuts& a, const Cuts& b) {
  std::int64_t pairs = 0;
  std::size_t i = 0;
  std::size_t j = 0;
  while (i + 1 < a.size() && j + 1 < b.size()) {
    if (a[i + 1] == a[i]) {
      ++i;
      continue;
    }
    if (b[j + 1] == b[j]) {
      ++j;
      continue;
    }
    if (std::max(a[i], b[j]) < std::min(a[i + 1], b[j + 1])) ++pairs;
    const auto end_a = a[i + 1];
    const auto end_b = b[j + 1];
    if (end_a <= end_b) ++i;
    if (end_b <= end_a) ++j;
  }
  return pairs;
}

struct Grid {
  std::int64_t rows = 1;
  std::int64_t cols = 1;
};

struct Case {
  const char* name;
  Grid saved;   // cut unevenly
  Grid loaded;  // cut like torch.chunk
};

struct Result {
  std::int64_t queries = 0;
  std::int64_t overlaps = 0;
  double build_s = 0;
  double query_s = 0;  // fresh answers: overlaps(box)
  double reuse_s = 0;  // one reused answer vector: overlaps(box, out)
  double plan_s = 0;   // load planning's lookups: overlapping_chunks(box, chunks)
};

const std::vector<Shape> kShapes{{4096, 1024}, {1024, 4096}, {2048, 2048}, {8192, 512}};

// Runs one case: returns false (after saying why) when an answer is wrong.
bool run_case(const Case& c, std::int64_t ranks, std::int64_t tensors, Result& best) {
  // The saved chunks of every tensor (index = saving rank), and the block
  // every loading rank wants of each shape.
  std::vector<std::vector<ChunkStorageMetadata>> saved(static_cast<std::size_t>(tensors));
  std::vector<std::vector<ChunkStorageMetadata>> wanted;
  wanted.reserve(kShapes.size());
  for (const auto& shape : kShapes)
    wanted.push_back(blocks(even_cuts(shape[0], c.loaded.rows), even_cuts(shape[1], c.loaded.cols)));
  std::int64_t expected_overlaps = 0;
  std::int64_t expected_volume = 0;
  std::mt19937_64 rng(12345);
  for (std::int64_t t = 0; t < tensors; ++t) {
    const auto& shape = kShapes[static_cast<std::size_t>(t) % kShapes.size()];
    const auto rows = uneven_cuts(shape[0], c.saved.rows, rng);
    const auto cols = uneven_cuts(shape[1], c.saved.cols, rng);
    saved[static_cast<std::size_t>(t)] = blocks(rows, cols);
    expected_overlaps += overlapping_pairs(rows, even_cuts(shape[0], c.loaded.rows)) *
                         overlapping_pairs(cols, even_cuts(shape[1], c.loaded.cols));
    expected_volume += h5dcp::detail::volume(shape);
  }

  // Every simulated rank plans its load: the overlaps of its block of every
  // tensor. `query` answers one block with how many saved chunks it meets
  // and the elements those hold; returns false on a wrong total.
  const auto all_ranks = [&](const std::vector<ChunkIndex>& indexes, const char* how, auto&& query) {
    std::int64_t overlaps = 0;
    std::int64_t volume = 0;
    best.queries = 0;
    for (std::int64_t r = 0; r < ranks; ++r) {
      for (std::int64_t t = 0; t < tensors; ++t) {
        const auto& box = wanted[static_cast<std::size_t>(t) % kShapes.size()][static_cast<std::size_t>(r)];
        const auto [found, covered] = query(indexes[static_cast<std::size_t>(t)], box);
        overlaps += found;
        volume += covered;
        ++best.queries;
      }
    }
    best.overlaps = overlaps;
    if (overlaps == expected_overlaps && volume == expected_volume) return true;
    std::fprintf(stderr,
                 "h5dcp-plan-bench: %s (%s): found %lld overlaps covering %lld elements; expected %lld overlaps "
                 "covering %lld elements\n",
                 c.name, how, static_cast<long long>(overlaps), static_cast<long long>(volume),
                 static_cast<long long>(expected_overlaps), static_cast<long long>(expected_volume));
    return false;
  };
  const auto seconds = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double>(to - from).count();
  };

  for (int run = 0; run < 3; ++run) {
    std::vector<ChunkIndex> indexes;
    indexes.reserve(saved.size());
    const auto t0 = Clock::now();
    for (const auto& chunks : saved) indexes.emplace_back(chunks);
    const auto t1 = Clock::now();
    // The intersections' elements, added up as a load planner would.
    const auto summed = [](const std::vector<h5dcp::detail::ChunkOverlap>& found) {
      std::int64_t covered = 0;
      for (const auto& o : found) covered += h5dcp::detail::volume(o.intersection.sizes);
      return std::pair{static_cast<std::int64_t>(found.size()), covered};
    };
    // A fresh answer per block: overlaps(box).
    if (!all_ranks(indexes, "fresh answers", [&](const ChunkIndex& index, const ChunkStorageMetadata& box) {
          return summed(index.overlaps(box));
        }))
      return false;
    const auto t2 = Clock::now();
    // One answer vector reused for every block: overlaps(box, out).
    std::vector<h5dcp::detail::ChunkOverlap> out;
    if (!all_ranks(indexes, "reused answers", [&](const ChunkIndex& index, const ChunkStorageMetadata& box) {
          index.overlaps(box, out);
          return summed(out);
        }))
      return false;
    const auto t3 = Clock::now();
    // What load planning calls: the chunks' indices and the elements they
    // cover, no boxes (overlapping_chunks(box, chunks)).
    std::vector<std::size_t> chunks;
    if (!all_ranks(indexes, "load planning's lookups", [&](const ChunkIndex& index, const ChunkStorageMetadata& box) {
          const auto covered = index.overlapping_chunks(box, chunks);
          return std::pair{static_cast<std::int64_t>(chunks.size()), covered};
        }))
      return false;
    const auto t4 = Clock::now();
    if (run == 0 || seconds(t0, t1) < best.build_s) best.build_s = seconds(t0, t1);
    if (run == 0 || seconds(t1, t2) < best.query_s) best.query_s = seconds(t1, t2);
    if (run == 0 || seconds(t2, t3) < best.reuse_s) best.reuse_s = seconds(t2, t3);
    if (run == 0 || seconds(t3, t4) < best.plan_s) best.plan_s = seconds(t3, t4);
  }
  return true;
}

// The most square grid of `ranks` blocks: rows <= cols.
Grid square_grid(std::int64_t ranks) {
  std::int64_t rows = 1;
  for (std::int64_t d = 1; d * d <= ranks; ++d)
    if (ranks % d == 0) rows = d;
  return {rows, ranks / rows};
}

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: h5dcp-plan-bench [--ranks N] [--tensors M] [--save-only]\n"
               "  Times load planning's chunk lookups (ChunkIndex) for N ranks (default 1024)\n"
               "  loading M tensors (default 1000) saved by N ranks with another sharding,\n"
               "  and the planning of a save of M tensors by N ranks (--save-only: that alone).\n"
               "  Exits 1 when an answer is wrong.\n");
}

bool parse_count(const char* text, std::int64_t& out) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < 1 || v > (1LL << 24)) return false;
  out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::int64_t ranks = 1024;
  std::int64_t tensors = 1000;
  bool save_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    }
    if (arg == "--save-only") {
      save_only = true;
      continue;
    }
    std::int64_t* target = arg == "--ranks" ? &ranks : arg == "--tensors" ? &tensors : nullptr;
    if (target == nullptr || i + 1 == argc || !parse_count(argv[i + 1], *target)) {
      std::fprintf(stderr, "h5dcp-plan-bench: bad argument '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
    ++i;
  }

  if (save_only) return h5dcp_bench::run_save_planning(ranks, tensors) ? 0 : 1;
  const Grid grid = square_grid(ranks);
  const Grid rows{ranks, 1};
  const Grid cols{1, ranks};
  const std::string grid_name = std::to_string(grid.rows) + "x" + std::to_string(grid.cols) + " grid";
  const std::string names[] = {"rows -> " + grid_name, grid_name + " -> rows", "columns -> " + grid_name,
                               grid_name + " -> columns"};
  const Case cases[] = {{names[0].c_str(), rows, grid},
                        {names[1].c_str(), grid, rows},
                        {names[2].c_str(), cols, grid},
                        {names[3].c_str(), grid, cols}};

  std::printf(
      "h5dcp-plan-bench: %lld ranks, %lld tensors of shapes [4096, 1024], [1024, 4096], [2048, 2048], "
      "[8192, 512]; seconds, best of 3\n"
      "  index s: building one ChunkIndex per tensor\n"
      "  query s: every rank's block of every tensor, a fresh answer each (overlaps(box))\n"
      "  reuse s: the same with one answer vector reused (overlaps(box, out))\n"
      "  plan s: what load planning calls, the chunks' indices and the elements they hold, no boxes\n"
      "          (overlapping_chunks(box, chunks)); a load's planning takes index s + plan s\n\n",
      static_cast<long long>(ranks), static_cast<long long>(tensors));
  std::printf("%-28s %6s %8s %10s %11s %9s %9s %9s %9s\n", "case (saved -> loaded)", "ranks", "tensors", "queries",
              "overlaps", "index s", "query s", "reuse s", "plan s");
  bool ok = true;
  for (const auto& c : cases) {
    Result r;
    if (!run_case(c, ranks, tensors, r)) {
      ok = false;
      continue;
    }
    std::printf("%-28s %6lld %8lld %10lld %11lld %9.3f %9.3f %9.3f %9.3f\n", c.name, static_cast<long long>(ranks),
                static_cast<long long>(tensors), static_cast<long long>(r.queries), static_cast<long long>(r.overlaps),
                r.build_s, r.query_s, r.reuse_s, r.plan_s);
    std::fflush(stdout);
  }
  ok = h5dcp_bench::run_save_planning(ranks, tensors) && ok;
  return ok ? 0 : 1;
}
