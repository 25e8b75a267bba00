// load_safetensors on 1-4 ranks: every.safetensors (written by the
// safetensors package, every dtype it has) and the sharded directory h5dcp
// exported from it, loaded into row-sharded, column-sharded and whole
// tensors, each rank reading its blocks itself; hostile files and a wrong
// shape fail on every rank. The reference is the checkpoint `h5dcp convert`
// imported from the same file (checked bit for bit against
// safetensors.torch.load_file in safetensors.roundtrip.np1).

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "h5dcp/checkpoint_reader.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/safetensors.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;

std::string fixture(const std::string& name) {
  const char* dir = std::getenv("H5DCP_SAFETENSORS_FILES");
  if (dir == nullptr) {
    ADD_FAILURE() << "H5DCP_SAFETENSORS_FILES is not set (CTest sets it; safetensors.make writes the files)";
    return "/nonexistent/" + name;
  }
  return std::string(dir) + "/" + name;
}

// A tensor of `shape` filled with 0xA5 bytes: any dtype, and never what a file holds by chance.
at::Tensor filled(const std::vector<std::int64_t>& shape, at::ScalarType type) {
  auto t = at::empty(shape, at::TensorOptions().dtype(type));
  if (t.numel() > 0) std::memset(t.data_ptr(), 0xA5, t.nbytes());
  return t;
}

// The destination: the reference's tree, tensors cut by position (rows,
// columns, whole), values replaced by placeholders of their type.
StateDict destination(CheckpointReader& reference, int rank, int size, std::vector<std::string>& sharded) {
  FlatStateDict flat;
  flat.containers = reference.metadata().containers;
  int position = 0;
  for (const auto& [fqn, storage] : reference.metadata().state_dict_metadata) {
    if (std::holds_alternative<BytesStorageMetadata>(storage)) {
      flat.leaves.emplace(fqn, std::string("placeholder"));
      continue;
    }
    const auto& t = std::get<TensorStorageMetadata>(storage);
    const auto type = at::empty({}, at::TensorOptions().dtype(reference.read_tensor(fqn).scalar_type())).scalar_type();
    const auto dim = (position++ % 3 == 1 && t.size.size() >= 2) ? 1 : 0;
    if (t.size.empty() || position % 3 == 0 || t.size[static_cast<std::size_t>(dim)] == 0) {
      flat.leaves.emplace(fqn, filled(t.size, type));
      continue;
    }
    const auto cuts = test::uneven_cuts(t.size[static_cast<std::size_t>(dim)], size);
    auto shape = t.size;
    shape[static_cast<std::size_t>(dim)] = cuts[rank + 1] - cuts[rank];
    std::vector<std::int64_t> offsets(shape.size(), 0);
    offsets[static_cast<std::size_t>(dim)] = cuts[rank];
    std::vector<Shard> shards;
    if (shape[static_cast<std::size_t>(dim)] > 0) shards.push_back(Shard{filled(shape, type), offsets});
    flat.leaves.emplace(fqn, ShardedTensor(t.size, std::move(shards)));
    sharded.push_back(fqn);
  }
  return unflatten_state_dict(flat);
}

void expect_equal_to_reference(const StateDict& loaded, CheckpointReader& reference) {
  for (const auto& [fqn, value] : flatten_state_dict(loaded).leaves) {
    if (const auto* t = std::get_if<at::Tensor>(&value)) {
      EXPECT_TRUE(bitwise_equal(*t, reference.read_tensor(fqn))) << fqn;
    } else if (const auto* s = std::get_if<ShardedTensor>(&value)) {
      for (const auto& shard : s->local_shards())
        EXPECT_TRUE(bitwise_equal(shard.tensor, reference.read_block(fqn, {shard.offsets, shard.tensor.sizes().vec()})))
            << fqn;
    } else {
      EXPECT_EQ(std::get<std::string>(value), std::get<std::string>(reference.value(fqn))) << fqn;
    }
  }
}

TEST(LoadSafetensors, AFileAndAShardedDirectoryLoadOntoAnySharding) {
  CheckpointReader reference(fixture("imported1.h5"));
  for (const auto* source : {"every.safetensors", "sharded1", "sharded1/model.safetensors.index.json"}) {
    std::vector<std::string> sharded;
    auto state = destination(reference, test::world_rank(), test::world_size(), sharded);
    const auto result = load_safetensors(state, fixture(source));
    EXPECT_TRUE(result.missing_keys.empty()) << source;
    EXPECT_GT(sharded.size(), 5u);
    expect_equal_to_reference(state, reference);
    // The header's __metadata__ came in as str values.
    EXPECT_EQ(std::get<std::string>(value_at(state, "__metadata__/format")), "pt") << source;
  }
}

TEST(LoadSafetensors, AHeaderThatLiesFailsOnEveryRankBeforeAnyRead) {
  StateDict state;
  state["a"] = at::zeros({4});
  const auto error =
      test::expect_checkpoint_error([&] { load_safetensors(state, fixture("hostile/past_the_data.safetensors")); });
  EXPECT_NE(std::string(error.what()).find("load:metadata"), std::string::npos) << error.what();
  EXPECT_NE(std::string(error.what()).find("tensor 'b' lies about its offsets"), std::string::npos) << error.what();
}

TEST(LoadSafetensors, AWrongShapeIsNamedOnEveryRank) {
  StateDict state;
  state["lm_head.weight"] = at::zeros({4, 4});
  LoadOptions options;
  options.strict = false;
  const auto error =
      test::expect_checkpoint_error([&] { load_safetensors(state, fixture("every.safetensors"), options); });
  EXPECT_NE(std::string(error.what()).find("lm_head.weight"), std::string::npos) << error.what();
}

}  // namespace
}  // namespace h5dcp
