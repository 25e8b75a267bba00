#include <gtest/gtest.h>

#include "h5dcp/error.hpp"
#include "plan/checksum_layout.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/load_plan.hpp"

namespace h5dcp::detail {
namespace {

Metadata saved() {
  Metadata md;
  md.state_dict_metadata["w"] = TensorStorageMetadata{{DType::Float32}, {8, 4}, {{{0, 0}, {8, 4}}}};
  md.state_dict_metadata["b"] = TensorStorageMetadata{{DType::Int64}, {4}, {{{0}, {4}}}};
  return md;
}

LoadRequest want(const std::string& fqn, DType dtype, Shape global, Shape offsets, Shape sizes) {
  return LoadRequest{MetadataIndex{fqn, offsets, 0}, false, dtype, std::move(global), {offsets, sizes}};
}

TEST(LoadPlan, AnyBlockOfASavedTensorCanBeRead) {
  const auto plan = create_local_load_plan({want("w", DType::Float32, {8, 4}, {3, 1}, {5, 2})}, saved(), true, false);
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].storage_offsets, (Shape{3, 1}));
  EXPECT_EQ(plan.items[0].lengths, (Shape{5, 2}));
  EXPECT_EQ(plan.items[0].dest_offsets, (Shape{0, 0}));
  EXPECT_EQ(plan.unexpected, std::vector<std::string>{"b"});
  EXPECT_EQ(plan.items[0].source_chunks, std::vector<std::size_t>{0});
}

TEST(LoadPlan, BlocksKnowTheSavedChunksTheyOverlap) {
  Metadata md;
  md.state_dict_metadata["r"] =
      TensorStorageMetadata{{DType::Float32}, {9, 4}, {{{0, 0}, {3, 4}}, {{3, 0}, {3, 4}}, {{6, 0}, {3, 4}}}};
  const auto plan = create_local_load_plan({want("r", DType::Float32, {9, 4}, {2, 1}, {5, 2})}, md, true, false);
  EXPECT_EQ(plan.items.at(0).source_chunks, (std::vector<std::size_t>{0, 1, 2}));
  // Damaged chunk attributes that leave a hole are caught.
  std::get<TensorStorageMetadata>(md.state_dict_metadata["r"]).chunks.pop_back();
  EXPECT_THROW(create_local_load_plan({want("r", DType::Float32, {9, 4}, {5, 0}, {4, 4})}, md, true, false),
               FormatError);
}

TEST(LoadPlan, EveryProblemIsReportedAtOnce) {
  try {
    create_local_load_plan(
        {want("missing.a", DType::Float32, {1}, {0}, {1}), want("missing.b", DType::Float32, {1}, {0}, {1}),
         want("w", DType::Float32, {8, 5}, {0, 0}, {8, 5}), want("b", DType::Int32, {4}, {0}, {4})},
        saved(), true, false);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("missing from the checkpoint: 'missing.a', 'missing.b'"), std::string::npos) << m;
    EXPECT_NE(m.find("'w' has global shape [8, 4] in the checkpoint but [8, 5]"), std::string::npos) << m;
    EXPECT_NE(m.find("'b' is int64 in the checkpoint but int32"), std::string::npos) << m;
  }
}

TEST(LoadPlan, BlockOutsideTheSavedShapeIsRefused) {
  EXPECT_THROW(create_local_load_plan({want("w", DType::Float32, {8, 4}, {6, 0}, {4, 4})}, saved(), true, false),
               UsageError);
}

TEST(Metadata, FindTensorMetadataNamesTheKey) {
  const auto md = saved();
  EXPECT_EQ(find_tensor_metadata(md, "w").size, (Shape{8, 4}));
  try {
    find_tensor_metadata(md, "nope");
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos);
  }
}

// The message of the FormatError a plan throws, or "" when it throws none.
std::string plan_error(const std::vector<LoadRequest>& wanted, const Metadata& md) {
  try {
    (void)create_local_load_plan(wanted, md, true, false);
  } catch (const FormatError& e) {
    return e.what();
  }
  return "";
}

// Chunks [0:2] and [1:3] of a [4, 2] tensor: their volumes add up to the
// tensor's, but row 3 has no chunk and row 1 two. A load checking volume sums
// read rows 0..2 and left row 3 untouched, with no error.
TEST(LoadPlan, OverlappingChunksWhoseVolumesAddUpAreRefused) {
  Metadata md;
  md.state_dict_metadata["w"] = TensorStorageMetadata{{DType::Float32}, {4, 2}, {{{0, 0}, {2, 2}}, {{1, 0}, {2, 2}}}};
  for (const auto& block : {want("w", DType::Float32, {4, 2}, {0, 0}, {4, 2}),     // the whole tensor
                            want("w", DType::Float32, {4, 2}, {0, 0}, {1, 2})}) {  // a block of one chunk only
    const auto message = plan_error({block}, md);
    EXPECT_EQ(message,
              "h5dcp: shards of 'w' overlap: [0:2, 0:2] and [1:3, 0:2]: the checkpoint's chunk attributes are damaged");
  }
}

TEST(LoadPlan, AGapHiddenByADuplicateChunkIsRefused) {
  Metadata md;
  md.state_dict_metadata["w"] = TensorStorageMetadata{{DType::Float32}, {4}, {{{0}, {2}}, {{0}, {2}}}};
  EXPECT_EQ(plan_error({want("w", DType::Float32, {4}, {2}, {2})}, md),
            "h5dcp: shards of 'w' overlap: [0:2] and [0:2]: the checkpoint's chunk attributes are damaged");
  md.state_dict_metadata["w"] = TensorStorageMetadata{{DType::Float32}, {4}, {{{0}, {1}}, {{2}, {2}}}};
  EXPECT_EQ(plan_error({want("w", DType::Float32, {4}, {2}, {2})}, md), "");  // the block misses the gap
  EXPECT_EQ(plan_error({want("w", DType::Float32, {4}, {0}, {4})}, md),
            "h5dcp: the saved chunks of 'w' do not cover the block [0:4]: the checkpoint's chunk attributes are "
            "damaged");
}

TEST(LoadPlan, ExactTilingsInAnyOrderLoad) {
  Metadata md;
  std::vector<ChunkStorageMetadata> grid;
  for (const std::int64_t c : {4, 0, 2})
    for (const std::int64_t r : {2, 0, 4}) grid.push_back({{r, c}, {2, 2}});
  grid.push_back({{6, 0}, {0, 6}});  // an empty chunk overlaps nothing
  md.state_dict_metadata["g"] = TensorStorageMetadata{{DType::Float64}, {6, 6}, grid};
  md.state_dict_metadata["s"] = TensorStorageMetadata{{DType::Float64}, {}, {{}}};
  const auto plan = create_local_load_plan(
      {want("g", DType::Float64, {6, 6}, {1, 1}, {4, 4}), want("s", DType::Float64, {}, {}, {})}, md, true, false);
  EXPECT_EQ(plan.items.at(0).source_chunks.size(), 9u);
}

// Shapes read from a file can claim 2^64 elements: volume() wrapped to 0 and
// `verify` checked nothing.
TEST(ChunkGeometry, VolumesThatOverflowAreCaught) {
  const std::int64_t two32 = std::int64_t{1} << 32;
  EXPECT_EQ(checked_volume({two32, two32}), std::nullopt);
  EXPECT_EQ(checked_volume({two32, two32 / 2 - 1}), two32 * (two32 / 2 - 1));
  EXPECT_EQ(checked_volume({0, two32, two32}), 0);  // empty, whatever the other sizes
  EXPECT_EQ(checked_volume({4, -1}), std::nullopt);
  EXPECT_EQ(checked_volume({}), 1);
  EXPECT_EQ(checked_bytes({two32, two32 / 8}, 4), std::nullopt);            // 2^63
  EXPECT_EQ(checked_bytes({two32, two32 / 16}, 4), std::int64_t{1} << 62);  // 2^32 * 2^28 * 4
  EXPECT_THROW((void)volume({two32, two32}), UsageError);
}

// Zeros, negatives and overflow in every order give the same answers (both
// functions test the sizes in one pass).
TEST(ChunkGeometry, VolumesDoNotDependOnWhereAZeroANegativeOrAnOverflowComes) {
  const std::int64_t two32 = std::int64_t{1} << 32;
  EXPECT_EQ(checked_volume({two32, two32, 0}), 0);  // the zero after the overflow
  EXPECT_EQ(checked_volume({two32, 0, two32}), 0);
  EXPECT_EQ(checked_volume({0, -1}), std::nullopt);  // a negative wins over a zero
  EXPECT_EQ(checked_volume({-1, 0}), std::nullopt);
  EXPECT_EQ(checked_volume({two32, two32, -1}), std::nullopt);
  EXPECT_EQ(checked_volume({3, 5, 7}), 105);
  EXPECT_EQ(volume({}), 1);
  EXPECT_EQ(volume({3, 5, 7}), 105);
  EXPECT_EQ(volume({two32, two32, 0}), 0);
  EXPECT_EQ(volume({3, 0, 5}), 0);
  EXPECT_EQ(volume({4, -1}), -4);  // as it always was: a plain product where a size is negative
  EXPECT_THROW((void)volume({2, two32, two32}), UsageError);
}

// Counting a chunk's slabs costs no memory, whatever the file claims.
TEST(ChecksumLayout, SlabsAreCountedWithoutBeingListed) {
  const ChunkStorageMetadata chunk{{0, 0}, {10, 3}};
  for (const std::int64_t rows : {1, 3, 4, 10, 11})
    EXPECT_EQ(checksum_slab_count(chunk, rows), static_cast<std::int64_t>(checksum_slabs(chunk, rows).size())) << rows;
  EXPECT_EQ(checksum_slab_count({{}, {}}, 5), 1);
  EXPECT_EQ(checksum_slab_count({{0, 0}, {0, 3}}, 1), 0);
  EXPECT_EQ(checksum_slab_count({{0}, {std::int64_t{1} << 62}}, 1), std::int64_t{1} << 62);
}

// The slabs' bytes, computed without listing them, are those of the listed
// slabs: every chunk shape a save meets (rows, a 0-d value, an empty chunk).
TEST(ChecksumLayout, SlabBytesAreThoseOfTheListedSlabs) {
  const std::vector<ChunkStorageMetadata> chunks{{{0, 0}, {10, 3}}, {{4, 2}, {7, 5}}, {{6}, {9}},
                                                 {{}, {}},          {{0, 0}, {0, 3}}, {{2, 0, 1}, {5, 2, 3}}};
  for (const auto& chunk : chunks)
    for (const std::int64_t rows : {1, 2, 3, 4, 10, 11})
      for (const std::int64_t element : {1, 2, 8}) {
        std::vector<std::int64_t> listed;
        for (const auto& slab : checksum_slabs(chunk, rows)) listed.push_back(volume(slab.sizes) * element);
        EXPECT_EQ(checksum_slab_bytes(chunk, rows, element), listed)
            << chunk.sizes.size() << "-d chunk, " << rows << " rows, element " << element;
      }
}

}  // namespace
}  // namespace h5dcp::detail
