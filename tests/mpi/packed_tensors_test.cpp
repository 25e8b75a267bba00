// Format 1.2's packs: small tensors saved whole share one dataset per dtype
// with an index table. They round-trip bit for bit on 1-4 ranks, load into
// any sharding, are verified like datasets, and a flipped byte in a pack or
// in the index is named, never loaded.

#include <gtest/gtest.h>
#include <hdf5.h>

#include "file_bytes.hpp"
#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;
using test::reference_tensor;

// Many small tensors of every dtype in nested containers, a list of them,
// an empty one, 0-d ones and one large tensor (a dataset of its own).
StateDict small_state(std::map<std::string, at::Tensor>& full) {
  StateDict layers;
  for (int l = 0; l < 40; ++l) {
    StateDict layer;
    for (const auto dtype : test::all_dtypes()) {
      const std::string name = c10::toString(dtype);
      const auto t = reference_tensor({3, 5}, dtype, l);
      full["layers/" + std::to_string(l) + "/" + name] = t;
      layer[name] = t.clone();
    }
    layers[std::to_string(l)] = std::move(layer);
  }
  StateList list;
  for (int i = 0; i < 3; ++i) {
    list.push_back(reference_tensor({4}, at::kBFloat16, 50 + i));
    full["norms/" + std::to_string(i)] = std::get<at::Tensor>(list.back());
  }
  full["empty"] = at::zeros({0, 3});
  full["step"] = reference_tensor({}, at::kLong, 9);
  full["big"] = reference_tensor({200, 100}, at::kFloat, 3);  // 80 KB: above the packs' 64 KiB
  StateDict sd{{"layers", std::move(layers)}, {"norms", std::move(list)}};
  for (const char* key : {"empty", "step", "big"}) sd[key] = full[key].clone();
  return sd;
}

// Every leaf of `sd` at its fqn ("a/b/0"), zeroed copies for a load target.
void zero_leaves(StateValue& v) {
  if (auto* t = std::get_if<at::Tensor>(&v)) *t = at::zeros_like(*t);
  if (auto* d = std::get_if<StateDict>(&v))
    for (auto& [k, c] : *d) zero_leaves(c);
  if (auto* l = std::get_if<StateList>(&v))
    for (auto& c : *l) zero_leaves(c);
}

void expect_leaves(const StateValue& v, const std::string& fqn, const std::map<std::string, at::Tensor>& full) {
  if (const auto* t = std::get_if<at::Tensor>(&v)) {
    EXPECT_TRUE(bitwise_equal(*t, full.at(fqn))) << fqn;
  }
  if (const auto* d = std::get_if<StateDict>(&v))
    for (const auto& [k, c] : *d) expect_leaves(c, fqn.empty() ? k : fqn + "/" + k, full);
  if (const auto* l = std::get_if<StateList>(&v))
    for (std::size_t i = 0; i < l->size(); ++i) expect_leaves((*l)[i], fqn + "/" + std::to_string(i), full);
}

// Rows of the packs' index and the links at the root, read with plain HDF5.
std::pair<hsize_t, hsize_t> index_rows_and_root_links(const std::string& file) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, "%packs/index", H5P_DEFAULT);
  const hid_t space = H5Dget_space(d);
  hsize_t rows = 0;
  H5Sget_simple_extent_dims(space, &rows, nullptr);
  H5G_info_t info{};
  H5Gget_info(f, &info);
  H5Sclose(space);
  H5Dclose(d);
  H5Fclose(f);
  return {rows, info.nlinks};
}

TEST(PackedTensors, SmallTensorsShareAPackAndRoundTripBitForBit) {
  test::TempDir dir;
  std::map<std::string, at::Tensor> full;
  auto sd = small_state(full);
  const auto path = dir.file("packed.h5");
  const auto md = save(sd, path).metadata;
  EXPECT_EQ(md.format_version_minor, 2);
  // 40 layers x every dtype, 3 norms, the empty and the 0-d tensor: packed; "big" is not.
  const auto [rows, root_links] = index_rows_and_root_links(path);
  EXPECT_EQ(rows, 40 * test::all_dtypes().size() + 5);
  EXPECT_EQ(root_links, 4u);  // layers, norms, big and %packs: the small tensors have no link of their own
  StateValue target(sd);
  zero_leaves(target);
  auto& loaded = std::get<StateDict>(target);
  load(loaded, path);
  expect_leaves(target, "", full);
  const auto stored = read_metadata(path);
  const auto& w = find_tensor_metadata(stored, "layers/7/Float");
  EXPECT_EQ(w.size, (std::vector<std::int64_t>{3, 5}));
  ASSERT_EQ(w.chunks.size(), 1u);
  EXPECT_EQ(w.chunks[0].sizes, (std::vector<std::int64_t>{3, 5}));
  const auto report = verify_checkpoint(path);
  EXPECT_TRUE(report.problems.empty()) << report.problems.front().message;
}

TEST(PackedTensors, APackedTensorLoadsIntoAnySharding) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  const auto full = reference_tensor({7, 9}, at::kDouble, 4);  // 504 bytes: packed
  save(StateDict{{"w", full.clone()}}, dir.file("w.h5"));
  // Columns and a grid: blocks that are no one range of the tensor.
  for (const auto& [rows, cols] : std::vector<std::pair<int, int>>{{1, size}, {3, 2}}) {
    StateDict target{{"w", test::zeros_like(test::grid_shards(full, rows, cols, rank, size))}};
    load(target, dir.file("w.h5"));
    for (const auto& s : std::get<ShardedTensor>(target.at("w")).local_shards())
      EXPECT_TRUE(bitwise_equal(
          s.tensor, full.narrow(0, s.offsets[0], s.tensor.size(0)).narrow(1, s.offsets[1], s.tensor.size(1))))
          << rows << " x " << cols << " grid, shard at " << s.offsets[0] << ", " << s.offsets[1];
  }
}

// More packed bytes than one run of a pack takes (plan/pack_runs.hpp: 8 MiB),
// each rank the writer of every size-th tensor, so that the packs interleave
// the writers' ranges: loaded whole on every rank, by rows (ranges of every
// tensor with gaps between them) and a rank's own tensors only (every
// size-th range), every tensor comes back bit for bit.
TEST(PackedTensors, ManySmallTensorsLoadFromRunsOfThePackInAnySharding) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  const int count = 300;  // 300 x 40 KiB: 11 MB of float32, 1.2 MB of int64
  std::vector<at::Tensor> full;
  StateDict sd;
  for (int i = 0; i < count; ++i) {
    const std::int64_t rows = i % 10 == 0 ? 32 : 64;  // 40 KiB either way
    full.push_back(reference_tensor({rows, 160}, i % 10 == 0 ? at::kLong : at::kFloat, i));
    const bool mine = i % size == rank;
    sd["t" + std::to_string(i)] = ShardedTensor(
        {rows, 160}, mine ? std::vector<Shard>{Shard{full.back().clone(), {0, 0}}} : std::vector<Shard>{});
  }
  const auto path = dir.file("many.h5");
  save(sd, path);
  const auto [rows, root_links] = index_rows_and_root_links(path);
  EXPECT_EQ(rows, static_cast<hsize_t>(count));
  EXPECT_EQ(root_links, 1u);  // %packs only

  StateDict whole;
  for (int i = 0; i < count; ++i) whole["t" + std::to_string(i)] = at::zeros_like(full[i]);
  load(whole, path);
  for (int i = 0; i < count; ++i)
    EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(whole.at("t" + std::to_string(i))), full[i])) << i;

  StateDict by_rows;
  for (int i = 0; i < count; ++i)
    by_rows["t" + std::to_string(i)] = test::zeros_like(test::grid_shards(full[i], size, 1, rank, size));
  load(by_rows, path);
  for (int i = 0; i < count; ++i) {
    for (const auto& s : std::get<ShardedTensor>(by_rows.at("t" + std::to_string(i))).local_shards()) {
      EXPECT_TRUE(bitwise_equal(s.tensor, full[i].narrow(0, s.offsets[0], s.tensor.size(0))))
          << i << ", rows from " << s.offsets[0];
    }
  }

  StateDict own;
  for (int i = rank; i < count; i += size) own["t" + std::to_string(i)] = at::zeros_like(full[i]);
  load(own, path);
  for (int i = rank; i < count; i += size)
    EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(own.at("t" + std::to_string(i))), full[i])) << i;
}

// A run of a pack is read straight into its tensors only when each has a
// place of its own that takes the stored bytes; a run holding a strided
// view, a tensor of another dtype (converted), a 0-d tensor or two tensors
// sharing memory (tied weights) is read through a buffer. Every kind loads
// bit for bit, with checksums verified, on every rank.
TEST(PackedTensors, RunsLoadIntoEveryKindOfDestination) {
  test::TempDir dir;
  const int count = 60;
  std::vector<at::Tensor> full;
  StateDict sd;
  for (int i = 0; i < count; ++i) {
    full.push_back(
        reference_tensor(i % 7 == 0 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{8, 16}, at::kFloat, i));
    sd["t" + std::to_string(i)] = full.back().clone();
  }
  const auto path = dir.file("kinds.h5");
  save(sd, path);

  StateDict target;
  std::vector<at::Tensor> strided(count);
  for (int i = 0; i < count; ++i) {
    auto zeros = at::zeros_like(full[i]);
    if (i % 5 == 1 && full[i].dim() == 2) {  // a transposed view: not contiguous
      strided[i] = at::zeros({16, 8});
      zeros = strided[i].t();
    }
    if (i % 5 == 2) zeros = at::zeros_like(full[i], at::kDouble);  // converted
    target["t" + std::to_string(i)] = zeros;
  }
  LoadOptions convert;
  convert.convert_dtype = true;
  load(target, path, convert);
  for (int i = 0; i < count; ++i) {
    const auto& got = std::get<at::Tensor>(target.at("t" + std::to_string(i)));
    if (i % 5 == 2) {
      EXPECT_TRUE(at::equal(got, full[i].to(at::kDouble))) << i;
    } else {
      EXPECT_TRUE(bitwise_equal(got.contiguous(), full[i])) << i;
    }
  }

  // Two saved tensors loaded into one (tied weights): each is read and
  // checked before the other is read over it; the later one stays.
  const auto pair = dir.file("pair.h5");
  save(StateDict{{"a", full[1].clone()}, {"b", full[3].clone()}}, pair);
  const auto tied = at::zeros_like(full[1]);
  StateDict both{{"a", tied}, {"b", tied}};
  load(both, pair);
  EXPECT_TRUE(bitwise_equal(tied, full[1]) || bitwise_equal(tied, full[3]));
}

// The bytes of dataset `name` of `file` as stored (its file type).
std::vector<char> stored_bytes(const std::string& file, const char* name) {
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  const hid_t type = H5Dget_type(d);
  std::vector<char> bytes(static_cast<std::size_t>(H5Dget_storage_size(d)));
  if (!bytes.empty()) H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
  H5Tclose(type);
  H5Dclose(d);
  H5Fclose(f);
  return bytes;
}

// The async save writes the packs from its staging memory, whole or
// streamed in pieces smaller than a pack: the same index and packs, byte for
// byte, as the sync save, and the same tensors back.
TEST(PackedTensors, AsyncSavesWriteTheSamePacksAsTheSyncSave) {
  test::TempDir dir;
  std::map<std::string, at::Tensor> full;
  const auto sync_path = dir.file("sync.h5");
  save(small_state(full), sync_path);
  for (const std::int64_t staging : {std::int64_t{64} << 20, std::int64_t{4096}}) {
    const auto path = dir.file("async-" + std::to_string(staging) + ".h5");
    async_save(small_state(full), path, test::staging_of(staging)).get();
    if (test::world_rank() == 0) {
      for (const char* name : {"%packs/index", "%packs/float32", "%packs/bfloat16", "%packs/bool", "%packs/int64"})
        EXPECT_EQ(stored_bytes(path, name), stored_bytes(sync_path, name)) << name << ", staging " << staging;
    }
    StateValue target(small_state(full));
    zero_leaves(target);
    load(std::get<StateDict>(target), path);
    expect_leaves(target, "", full);
  }
}

TEST(PackedTensors, AFlippedByteInAPackOrInTheIndexIsNamed) {
  test::TempDir dir;
  const auto a = reference_tensor({4}, at::kFloat, 1);
  const auto b = reference_tensor({4}, at::kFloat, 2);
  const auto path = dir.file("p.h5");
  save(StateDict{{"a", a.clone()}, {"b", b.clone()}}, path);
  test::flip_byte(path, test::data_offset(path, "%packs/float32", 16 + 5));  // b's second element ("a" comes first)
  StateDict target{{"a", at::zeros({4})}, {"b", at::zeros({4})}};
  auto error = test::expect_checkpoint_error([&] { load(target, path); });
  EXPECT_NE(std::string(error.what()).find("'b'"), std::string::npos) << error.what();
  EXPECT_NE(std::string(error.what()).find("checksum"), std::string::npos) << error.what();
  EXPECT_FALSE(verify_checkpoint(path).problems.empty());

  const auto second = dir.file("q.h5");
  save(StateDict{{"a", a.clone()}, {"b", b.clone()}}, second);
  test::flip_byte(second, test::data_offset(second, "%packs/index", 1));  // a letter of the first fqn
  error = test::expect_checkpoint_error([&] { load(target, second); });
  EXPECT_NE(std::string(error.what()).find("index"), std::string::npos) << error.what();
  EXPECT_EQ(error.step(), "load:metadata");
}

}  // namespace
}  // namespace h5dcp
