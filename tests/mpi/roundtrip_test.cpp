// Collective save and load at 1-4 ranks: every dtype bit for bit; row,
// column and 2-D block shardings with uneven sizes and several shards per
// rank; loading into another sharding than the one saved.

#include <gtest/gtest.h>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;
using test::reference_tensor;

const std::vector<at::ScalarType>& kAllDtypes = test::all_dtypes();

// Rows [cuts[r], cuts[r+1]) of `full` for this rank.
ShardedTensor row_shards(const at::Tensor& full, int rank, int size) {
  const auto cuts = test::uneven_cuts(full.size(0), size);
  std::vector<Shard> shards;
  std::vector<std::int64_t> offsets(full.dim(), 0);
  offsets[0] = cuts[rank];
  shards.push_back(Shard{full.narrow(0, cuts[rank], cuts[rank + 1] - cuts[rank]).clone(), offsets});
  return ShardedTensor(std::vector<std::int64_t>(full.sizes().begin(), full.sizes().end()), std::move(shards));
}

ShardedTensor column_shards(const at::Tensor& full, int rank, int size) {
  return test::grid_shards(full, 1, size, rank, size);
}

void expect_shards_match(const ShardedTensor& loaded, const at::Tensor& full, const std::string& what) {
  for (const auto& s : loaded.local_shards()) {
    auto expected = full;
    for (std::size_t d = 0; d < s.offsets.size(); ++d)
      expected =
          expected.narrow(static_cast<std::int64_t>(d), s.offsets[d], s.tensor.size(static_cast<std::int64_t>(d)));
    EXPECT_TRUE(bitwise_equal(s.tensor, expected)) << what << " shard at offset " << s.offsets[0];
  }
}

TEST(RoundTrip, EveryDtypeBitForBit) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  StateDict saved;
  std::map<std::string, at::Tensor> full;
  for (const auto dtype : kAllDtypes) {
    const std::string name = c10::toString(dtype);
    full["sharded." + name] = reference_tensor({9, 5}, dtype);
    full["plain." + name] = reference_tensor({6}, dtype, 100);
    full["scalar." + name] = reference_tensor({}, dtype, 7);
    saved["sharded." + name] = row_shards(full["sharded." + name], rank, size);
    saved["plain." + name] = full["plain." + name].clone();
    saved["scalar." + name] = full["scalar." + name].clone();
  }
  const auto metadata = save(saved, dir.file("all.h5")).metadata;
  EXPECT_EQ(metadata.world_size, size);
  EXPECT_EQ(metadata.state_dict_metadata.size(), 3 * kAllDtypes.size());

  StateDict target;
  for (const auto& [key, value] : saved) {
    if (const auto* t = std::get_if<at::Tensor>(&value))
      target[key] = at::zeros_like(*t);
    else
      target[key] = test::zeros_like(std::get<ShardedTensor>(value));
  }
  load(target, dir.file("all.h5"));
  for (const auto& [key, value] : target) {
    if (const auto* t = std::get_if<at::Tensor>(&value))
      EXPECT_TRUE(bitwise_equal(*t, full[key])) << key;
    else
      expect_shards_match(std::get<ShardedTensor>(value), full[key], key);
  }
}

TEST(RoundTrip, MetadataDescribesDtypesShapesAndChunks) {
  test::TempDir dir;
  const int size = test::world_size();
  const auto full = reference_tensor({10, 3}, at::kBFloat16);
  StateDict sd{{"w", row_shards(full, test::world_rank(), size)}, {"b", reference_tensor({3}, at::kHalf)}};
  save(sd, dir.file("m.h5"));
  const auto md = read_metadata(dir.file("m.h5"));
  EXPECT_EQ(md.format_version_major, kFormatVersionMajor);
  EXPECT_EQ(md.library_version, kLibraryVersion);
  EXPECT_EQ(md.world_size, size);
  EXPECT_EQ(md.created.size(), 20u) << md.created;  // 2026-11-21T23:59:01Z
  const auto& w = find_tensor_metadata(md, "w");
  EXPECT_EQ(w.properties.dtype, DType::BFloat16);
  EXPECT_EQ(w.size, (std::vector<std::int64_t>{10, 3}));
  EXPECT_EQ(w.chunks.size(), static_cast<std::size_t>(size));
  const auto cuts = test::uneven_cuts(10, size);
  for (int r = 0; r < size; ++r) {
    EXPECT_EQ(w.chunks[r].offsets, (std::vector<std::int64_t>{cuts[r], 0}));
    EXPECT_EQ(w.chunks[r].sizes, (std::vector<std::int64_t>{cuts[r + 1] - cuts[r], 3}));
  }
  const auto& b = find_tensor_metadata(md, "b");
  EXPECT_EQ(b.chunks.size(), 1u);  // replicated: written once
}

struct Layout {
  const char* name;
  ShardedTensor (*make)(const at::Tensor&, int, int);
};

ShardedTensor blocks_2d(const at::Tensor& full, int rank, int size) {
  // A 3 x 2 grid of uneven blocks, dealt round-robin: several per rank.
  return test::grid_shards(full, 3, 2, rank, size);
}
ShardedTensor blocks_fine(const at::Tensor& full, int rank, int size) {
  return test::grid_shards(full, 4, 5, rank, size);
}

const std::vector<Layout> kLayouts{
    {"rows", row_shards}, {"columns", column_shards}, {"blocks", blocks_2d}, {"fine-blocks", blocks_fine}};

TEST(RoundTrip, AnyShardingLoadsIntoAnyOther) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  const auto full = reference_tensor({23, 17}, at::kFloat);
  for (const auto& saved_as : kLayouts) {
    const auto path = dir.file(std::string(saved_as.name) + ".h5");
    StateDict sd{{"weight", saved_as.make(full, rank, size)}};
    save(sd, path);
    for (const auto& loaded_as : kLayouts) {
      auto target = test::zeros_like(loaded_as.make(full, rank, size));
      StateDict into{{"weight", target}};
      load(into, path);
      expect_shards_match(std::get<ShardedTensor>(into.at("weight")), full,
                          std::string(saved_as.name) + " -> " + loaded_as.name);
    }
    // The whole tensor, as a plain (replicated) value, on every rank.
    StateDict whole{{"weight", at::zeros_like(full)}};
    load(whole, path);
    EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(whole.at("weight")), full)) << saved_as.name << " -> whole";
  }
}

TEST(RoundTrip, IndependentIoAndAnotherCoordinator) {
  test::TempDir dir;
  const int size = test::world_size();
  const auto full = reference_tensor({11, 7}, at::kDouble);
  StateDict sd{{"x", test::grid_shards(full, 2, 3, test::world_rank(), size)}};
  SaveOptions options;
  options.io_mode = IoMode::Independent;
  options.coordinator = size - 1;
  save(sd, dir.file("ind.h5"), options);
  StateDict into{{"x", at::zeros_like(full)}};
  load(into, dir.file("ind.h5"), LoadOptions{size - 1});
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(into.at("x")), full));
}

TEST(RoundTrip, KeysThatAreNotHdf5NamesAndEmptyTensors) {
  test::TempDir dir;
  StateDict sd{{"a/b", reference_tensor({3}, at::kInt)},
               {"layer 1.weight", reference_tensor({2, 2}, at::kFloat)},
               {"κλειδί%", reference_tensor({2}, at::kLong)},
               {".", reference_tensor({1}, at::kChar)},
               {"empty", at::zeros({0, 4}, at::kFloat)}};
  save(sd, dir.file("names.h5"));
  StateDict into;
  for (const auto& [k, v] : sd) into[k] = at::full_like(std::get<at::Tensor>(v), 1);
  load(into, dir.file("names.h5"));
  for (const auto& [k, v] : sd)
    EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(into.at(k)), std::get<at::Tensor>(v))) << k;
}

TEST(RoundTrip, NonContiguousSourcesAndTargets) {
  test::TempDir dir;
  const auto full = reference_tensor({6, 8}, at::kFloat);
  StateDict sd{{"t", full.t()}};  // a transposed view: not contiguous
  save(sd, dir.file("view.h5"));
  auto storage = at::zeros({8, 12}, at::kFloat);
  auto target = storage.narrow(1, 2, 6);  // a strided window into a larger tensor
  StateDict into{{"t", target}};
  load(into, dir.file("view.h5"));
  EXPECT_TRUE(bitwise_equal(target, full.t()));
  EXPECT_EQ(storage.narrow(1, 0, 2).abs().sum().item<float>(), 0.0f);  // nothing outside the window
}

TEST(RoundTrip, ReplicatedShardsAreWrittenOnce) {
  // Every rank holds the same two halves (like a tensor-parallel shard
  // replicated over data-parallel ranks): one chunk each in the file.
  test::TempDir dir;
  const auto full = reference_tensor({8, 2}, at::kFloat);
  StateDict sd{{"tp", ShardedTensor({8, 2}, {Shard{full.narrow(0, 0, 5).clone(), {0, 0}},
                                             Shard{full.narrow(0, 5, 3).clone(), {5, 0}}})}};
  const auto md = save(sd, dir.file("rep.h5")).metadata;
  EXPECT_EQ(find_tensor_metadata(md, "tp").chunks.size(), 2u);
  StateDict into{{"tp", at::zeros_like(full)}};
  load(into, dir.file("rep.h5"));
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(into.at("tp")), full));
}

TEST(RoundTrip, SavingOverAnExistingCheckpointReplacesIt) {
  test::TempDir dir;
  StateDict first{{"v", reference_tensor({4}, at::kFloat)}};
  StateDict second{{"v", reference_tensor({4}, at::kFloat, 50)}};
  save(first, dir.file("c.h5"));
  save(second, dir.file("c.h5"));
  StateDict into{{"v", at::zeros({4}, at::kFloat)}};
  load(into, dir.file("c.h5"));
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(into.at("v")), std::get<at::Tensor>(second.at("v"))));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"c.h5"});  // no temporary files left behind
}

}  // namespace
}  // namespace h5dcp
