// A torch.save file (written by PyTorch: load.pt of torch_save_cases.py) on
// 1-4 ranks: load_torch_save with row, column, grid and whole layouts, each
// rank receiving exactly its own bytes; collective failures; and
// torch_save_to_checkpoint splitting the write across the ranks. The
// reference is read_torch_save of the same file on every rank (itself
// checked bit for bit against PyTorch's values in torch_save.unit).

#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>

#include "h5dcp/checkpoint.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/torch_save.hpp"
#include "interop/torch_save/load.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;

std::string fixture(const std::string& name) {
  const char* dir = std::getenv("H5DCP_TORCH_SAVE_FIXTURES");
  if (dir == nullptr) {
    ADD_FAILURE() << "H5DCP_TORCH_SAVE_FIXTURES is not set (CTest sets it; torch_save.fixtures writes the files)";
    return "/nonexistent/" + name;
  }
  return std::string(dir) + "/" + name;
}

const at::Tensor& tensor_at(const StateDict& sd, const std::string& fqn) {
  return std::get<at::Tensor>(value_at(sd, fqn));
}

// This rank's block of `full` along `dim` (uneven cuts), zero-filled.
ShardedTensor along(const at::Tensor& full, std::int64_t dim, int rank, int size) {
  const auto cuts = test::uneven_cuts(full.size(dim), size);
  auto shape = full.sizes().vec();
  shape[static_cast<std::size_t>(dim)] = cuts[rank + 1] - cuts[rank];
  std::vector<std::int64_t> offsets(shape.size(), 0);
  offsets[static_cast<std::size_t>(dim)] = cuts[rank];
  std::vector<Shard> shards;
  if (shape[static_cast<std::size_t>(dim)] > 0) shards.push_back(Shard{at::zeros(shape, full.options()), offsets});
  return ShardedTensor(full.sizes().vec(), std::move(shards));
}

at::Tensor block_of(const at::Tensor& full, const Shard& shard) {
  auto block = full;
  for (std::int64_t d = 0; d < full.dim(); ++d) block = block.narrow(d, shard.offsets[d], shard.tensor.size(d));
  return block.contiguous();
}

// Checks every tensor of `target` against `expected`; returns the bytes held.
std::int64_t check_against(const StateDict& target, const StateDict& expected) {
  std::int64_t bytes = 0;
  for (const auto& [fqn, value] : flatten_state_dict(target).leaves) {
    if (const auto* t = std::get_if<at::Tensor>(&value)) {
      EXPECT_TRUE(bitwise_equal(*t, tensor_at(expected, fqn).to(t->scalar_type()))) << fqn;
      bytes += t->numel() * t->element_size();
    } else if (const auto* s = std::get_if<ShardedTensor>(&value)) {
      for (const auto& shard : s->local_shards()) {
        EXPECT_TRUE(bitwise_equal(shard.tensor, block_of(tensor_at(expected, fqn), shard))) << fqn;
        bytes += shard.tensor.numel() * shard.tensor.element_size();
      }
    } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
      EXPECT_EQ(*i, std::get<std::int64_t>(value_at(expected, fqn))) << fqn;
    } else if (const auto* f = std::get_if<double>(&value)) {
      EXPECT_EQ(*f, std::get<double>(value_at(expected, fqn))) << fqn;
    } else {
      EXPECT_EQ(std::get<std::string>(value), std::get<std::string>(value_at(expected, fqn))) << fqn;
    }
  }
  return bytes;
}

TEST(LoadTorchSave, RowColumnGridAndWholeLayoutsInSmallRounds) {
  const int rank = test::world_rank();
  const int size = test::world_size();
  const auto expected = read_torch_save(fixture("load.pt"));
  const auto& m = std::get<StateDict>(expected.at("model"));
  const auto full = [&](const char* k) { return std::get<at::Tensor>(m.at(k)).contiguous(); };
  StateDict target{
      {"model", StateDict{{"w", along(full("w"), 0, rank, size)},
                          {"b", at::zeros_like(full("b"))},
                          {"t", along(full("t"), 1, rank, size)},
                          {"mask", along(full("mask"), 0, rank, size)},
                          {"ids", along(full("ids"), 2, rank, size)},
                          {"big", test::zeros_like(test::grid_shards(full("big"), 2, 2, rank, size))},
                          {"big3d", along(full("big3d"), 1, rank, size)},
                          {"f8", along(full("f8"), 1, rank, size)},
                          {"c128", along(full("c128"), 0, rank, size)}}},
      {"scalar", at::zeros({})},
      {"empty", at::zeros({0, 3})},
      {"step", 0},
      {"lr", 0.0},
      {"name", ""},
  };
  TorchSaveLoadOptions options;
  options.max_message_bytes = 4096;  // the smallest: blocks go in pieces, over many rounds
  detail::TorchLoadStats stats;
  const auto result = detail::load_torch_save_with_stats(target, fixture("load.pt"), options, MPI_COMM_WORLD, stats);
  EXPECT_TRUE(result.missing_keys.empty());
  EXPECT_TRUE(result.unexpected_keys.empty());
  const auto held = check_against(target, expected);
  EXPECT_EQ(stats.bytes_received, held) << "a rank receives its own blocks and nothing else";
  EXPECT_GE(stats.rounds, 300 * 40 * 4 / 4096);
  EXPECT_EQ(std::get<std::int64_t>(target.at("step")), 3);
  EXPECT_EQ(std::get<std::string>(target.at("name")), "x");
}

TEST(LoadTorchSave, WholeTensorsInOneRoundAndConvertedDtypes) {
  const auto expected = read_torch_save(fixture("load.pt"));
  auto target = expected;  // same structure, fresh tensors below
  auto& m = std::get<StateDict>(target.at("model"));
  for (auto& [k, v] : m) v = at::zeros_like(std::get<at::Tensor>(v), at::MemoryFormat::Contiguous);
  m["w"] = at::zeros({37, 11}, at::kDouble);  // stored float32: converted on load
  TorchSaveLoadOptions options;
  options.convert_dtype = true;
  detail::TorchLoadStats stats;
  detail::load_torch_save_with_stats(target, fixture("load.pt"), options, MPI_COMM_WORLD, stats);
  check_against(target, expected);
  EXPECT_EQ(stats.rounds, 1);
  EXPECT_EQ(stats.bytes_received,
            37 * 11 * 4 + 13 * 2 + 11 * 7 * 8 + 25 + 60 * 4 + 300 * 40 * 4 + 4 * 50 * 30 * 4 + 12 * 6 + 8 * 3 * 16 + 4);
}

TEST(LoadTorchSave, NonStrictReportsMissingAndUnexpectedKeys) {
  StateDict target{{"model", StateDict{{"b", at::zeros({13}, at::kBFloat16)}, {"nope", at::zeros({2})}}}};
  TorchSaveLoadOptions options;
  options.strict = false;
  const auto result = load_torch_save(target, fixture("load.pt"), options);
  EXPECT_EQ(result.missing_keys, std::vector<std::string>{"model/nope"});
  EXPECT_EQ(result.unexpected_keys.size(), 13u);  // 14 leaves, 1 asked for
  EXPECT_TRUE(bitwise_equal(tensor_at(target, "model/b"), test::reference_tensor({13}, at::kBFloat16)));
}

TEST(LoadTorchSave, FailuresAreCollective) {
  const int rank = test::world_rank();
  const int size = test::world_size();
  // One rank asks for the wrong shape: every rank fails in load:plan, naming it.
  StateDict target{{"model", StateDict{{"w", at::zeros({rank == size - 1 ? 36 : 37, 11})}}}};
  TorchSaveLoadOptions options;
  options.strict = false;
  try {
    load_torch_save(target, fixture("load.pt"), options);
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.step(), "load:plan");
    ASSERT_EQ(e.failures().count(size - 1), 1u);
    EXPECT_NE(e.failures().at(size - 1).find("[36, 11]"), std::string::npos);
  }
  // The file does not exist: the coordinator's failure, on every rank.
  try {
    load_torch_save(target, fixture("missing.pt"));
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.step(), "load:metadata");
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos);
  }
  // A rank that fails while the pieces flow stops every rank.
  StateDict whole{{"model", StateDict{{"big", at::zeros({300, 40})}}}};
  ::setenv("H5DCP_INJECT_FAULT", ("load:read@" + std::to_string(size - 1)).c_str(), 1);
  EXPECT_THROW(load_torch_save(whole, fixture("load.pt"), options), CheckpointError);
  ::unsetenv("H5DCP_INJECT_FAULT");
  load_torch_save(whole, fixture("load.pt"), options);  // and the next load works
  EXPECT_TRUE(bitwise_equal(tensor_at(whole, "model/big"), test::reference_tensor({300, 40}, at::kFloat)));
}

TEST(TorchSaveToCheckpoint, SplitsTheWriteAcrossRanks) {
  const int size = test::world_size();
  const auto expected = read_torch_save(fixture("load.pt"));
  test::TempDir dir;
  TorchSaveToCheckpointOptions options;
  options.split_min_bytes = 0;
  const auto saved = torch_save_to_checkpoint(fixture("load.pt"), dir.file("c.h5"), options);
  const auto& big = find_tensor_metadata(saved.metadata, "model/big");
  EXPECT_EQ(big.chunks.size(), static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) EXPECT_GT(saved.bytes_per_rank[static_cast<std::size_t>(r)], 0) << r;
  EXPECT_EQ(find_tensor_metadata(saved.metadata, "scalar").chunks.size(), 1u);
  const auto loaded = load_all(dir.file("c.h5"));
  check_against(loaded, expected);
  EXPECT_EQ(flatten_state_dict(loaded).leaves.size(), flatten_state_dict(expected).leaves.size());

  // By default small tensors are written whole, by one rank each.
  const auto whole = torch_save_to_checkpoint(fixture("load.pt"), dir.file("d.h5"));
  EXPECT_EQ(find_tensor_metadata(whole.metadata, "model/big").chunks.size(), 1u);
  check_against(load_all(dir.file("d.h5")), expected);
}

TEST(TorchSaveToCheckpoint, LegacyFilesFailOnEveryRankWithHowToReSave) {
  test::TempDir dir;
  try {
    torch_save_to_checkpoint(fixture("legacy.pt"), dir.file("x.h5"));
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.step(), "convert:index");
    EXPECT_NE(std::string(e.what()).find("legacy format"), std::string::npos);
  }
  EXPECT_TRUE(dir.entries().empty());
}

}  // namespace
}  // namespace h5dcp
