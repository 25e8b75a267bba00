// The reshard matrix across rank counts: `save DIR` writes one checkpoint per
// sharding (rows, columns, 2-D blocks, uneven with an empty shard,
// replicated) from the ranks it runs on; `load DIR` loads every checkpoint in
// DIR -- saved on any rank count -- into every other sharding on the ranks it
// runs on, and checks every value. CTest runs `save` at 1-4 ranks, then
// `load` at 1-4 ranks.

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace {

using h5dcp::Shard;
using h5dcp::ShardedTensor;
using h5dcp::StateDict;

const std::vector<std::string> kLayouts{"rows", "columns", "blocks", "uneven", "replicated"};

// The blocks of a grid over dims 0 and 1 of `full` (other dims whole), given
// to ranks round-robin; the blocks of `rank`, cloned.
ShardedTensor grid(const at::Tensor& full, const std::vector<std::int64_t>& rows, const std::vector<std::int64_t>& cols,
                   int rank, int size) {
  std::vector<Shard> shards;
  int block = 0;
  for (std::size_t r = 0; r + 1 < rows.size(); ++r)
    for (std::size_t c = 0; c + 1 < cols.size(); ++c, ++block) {
      if (block % size != rank) continue;
      std::vector<std::int64_t> offsets(static_cast<std::size_t>(full.dim()), 0);
      offsets[0] = rows[r];
      offsets[1] = cols[c];
      shards.push_back(Shard{
          full.narrow(0, rows[r], rows[r + 1] - rows[r]).narrow(1, cols[c], cols[c + 1] - cols[c]).clone(), offsets});
    }
  return ShardedTensor(full.sizes().vec(), std::move(shards));
}

h5dcp::StateValue layout(const std::string& name, const at::Tensor& full, int rank, int size) {
  const auto n0 = full.size(0);
  const auto n1 = full.size(1);
  if (name == "rows") return grid(full, h5dcp::test::uneven_cuts(n0, size), {0, n1}, rank, size);
  if (name == "columns") return grid(full, {0, n0}, h5dcp::test::uneven_cuts(n1, size), rank, size);
  if (name == "blocks")
    return grid(full, h5dcp::test::uneven_cuts(n0, size), h5dcp::test::uneven_cuts(n1, 2), rank, size);
  if (name == "uneven") {
    // Rank 0 gets one row, the rest is split, and with 3+ ranks the last
    // rank's shard is empty (0 rows at the end).
    std::vector<std::int64_t> cuts{0};
    const int holders = size >= 3 ? size - 1 : size;
    if (holders > 1) cuts.push_back(1);
    for (int r = static_cast<int>(cuts.size()); r < holders; ++r)
      cuts.push_back(1 + (n0 - 1) * (r - 1) / (holders - 1));
    cuts.push_back(n0);
    if (holders < size) cuts.push_back(n0);
    return grid(full, cuts, {0, n1}, rank, size);
  }
  return full.clone();  // replicated
}

h5dcp::StateValue zeros_in(const h5dcp::StateValue& like) {
  if (const auto* t = std::get_if<at::Tensor>(&like)) return at::zeros_like(*t);
  return h5dcp::test::zeros_like(std::get<ShardedTensor>(like));
}

std::map<std::string, at::Tensor> reference() {
  // PyTorch 2.x's dtypes too: complex (a compound type in the file) and float8.
  return {{"w", h5dcp::test::reference_tensor({37, 23}, at::kFloat)},
          {"nested/v", h5dcp::test::reference_tensor({5, 7, 4}, at::kBFloat16)},
          {"nested/c", h5dcp::test::reference_tensor({11, 6}, at::kComplexFloat)},
          {"f8", h5dcp::test::reference_tensor({9, 5}, at::kFloat8_e4m3fn)}};
}

StateDict state_in(const std::string& name, int rank, int size) {
  const auto ref = reference();
  return StateDict{{"w", layout(name, ref.at("w"), rank, size)},
                   {"f8", layout(name, ref.at("f8"), rank, size)},
                   {"nested", StateDict{{"v", layout(name, ref.at("nested/v"), rank, size)},
                                        {"c", layout(name, ref.at("nested/c"), rank, size)}}}};
}

bool matches(const h5dcp::StateValue& got, const at::Tensor& full) {
  if (const auto* t = std::get_if<at::Tensor>(&got)) return h5dcp::test::bitwise_equal(*t, full);
  for (const auto& s : std::get<ShardedTensor>(got).local_shards()) {
    auto expected = full;
    for (std::size_t d = 0; d < s.offsets.size(); ++d)
      expected =
          expected.narrow(static_cast<std::int64_t>(d), s.offsets[d], s.tensor.size(static_cast<std::int64_t>(d)));
    if (!h5dcp::test::bitwise_equal(s.tensor, expected)) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  h5dcp::prefer_romio_io_component();
  MPI_Init(&argc, &argv);
  const int rank = h5dcp::test::world_rank();
  const int size = h5dcp::test::world_size();
  const std::string mode = argc > 2 ? argv[1] : "";
  const std::string dir = argc > 2 ? argv[2] : "";
  int passed = 0;
  int failed = 0;
  auto report = [&](bool ok, const std::string& what) {
    int all_ok = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    (all_ok ? passed : failed)++;
    if (!all_ok && rank == 0) std::printf("FAIL: %s\n", what.c_str());
  };

  try {
    if (mode == "save") {
      for (const auto& name : kLayouts) {
        const auto path = dir + "/np" + std::to_string(size) + "-" + name + ".h5";
        const auto result = h5dcp::save(state_in(name, rank, size), path);
        report(result.metadata.world_size == size, "save " + path);
      }
    } else if (mode == "load") {
      std::vector<std::string> files;
      for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".h5") files.push_back(e.path().string());
      std::sort(files.begin(), files.end());
      report(files.size() >= kLayouts.size(), "checkpoints found in " + dir);
      const int expected_pairs = static_cast<int>(files.size() * kLayouts.size());
      const auto ref = reference();
      for (const auto& file : files) {
        // Every layout, the one it was saved in included: rows@N -> rows@M
        // reshards whenever N != M (and is a plain round trip when N == M).
        for (const auto& name : kLayouts) {
          auto like = state_in(name, rank, size);
          StateDict target{{"w", zeros_in(like.at("w"))},
                           {"f8", zeros_in(like.at("f8"))},
                           {"nested", StateDict{{"v", zeros_in(h5dcp::value_at(like, "nested/v"))},
                                                {"c", zeros_in(h5dcp::value_at(like, "nested/c"))}}}};
          h5dcp::load(target, file);
          bool all = true;
          for (const auto& [fqn, full] : ref) all = all && matches(h5dcp::value_at(target, fqn), full);
          report(all, file + " -> " + name + " on " + std::to_string(size) + " ranks");
        }
      }
      // Every file was loaded into every layout.
      report(passed + failed == 1 + expected_pairs,
             "loads made: " + std::to_string(passed + failed - 1) + " of " + std::to_string(expected_pairs));
    } else {
      if (rank == 0) std::fprintf(stderr, "usage: reshard_matrix save|load DIR\n");
      MPI_Finalize();
      return 2;
    }
  } catch (const h5dcp::Error& e) {
    if (rank == 0) std::printf("FAIL: %s\n", e.what());
    ++failed;
  }
  if (rank == 0) std::printf("%d passed, %d failed\n", passed, failed);
  MPI_Finalize();
  return failed == 0 ? 0 : 1;
}
