// What a load reads to fill a block with verified bytes
// (plan/slab_reads.hpp): the slabs of the saved chunks it overlaps, their
// digests, and the part of each that goes into the block.

#include <gtest/gtest.h>

#include "plan/chunk_geometry.hpp"
#include "plan/slab_reads.hpp"

namespace h5dcp::detail {
namespace {

// float32 [10, 4] saved as rows [0, 6) and [6, 10), with slabs of 4 rows:
// chunk 0 has slabs [0, 4) and [4, 6) (digests 0, 1); chunk 1 has [6, 10)
// (digest 2).
TensorStorageMetadata storage() {
  TensorStorageMetadata s;
  s.properties.dtype = DType::Float32;
  s.size = {10, 4};
  s.chunks = {{{0, 0}, {6, 4}}, {{6, 0}, {4, 4}}};
  return s;
}
const TensorChecksums kChecksums{{4, 4}, {11, 12, 13}};

ReadItem item(Shape offsets, Shape lengths, std::vector<std::size_t> sources) {
  ReadItem r;
  r.storage_fqn = "w";
  r.storage_offsets = std::move(offsets);
  r.lengths = std::move(lengths);
  r.dtype = DType::Float32;
  r.source_chunks = std::move(sources);
  return r;
}

TEST(SlabReads, AWholeChunkIsReadInPlaceAndCheckedSlabBySlab) {
  const auto plan = plan_slab_reads(item({0, 0}, {6, 4}, {0}), storage(), kChecksums, /*in_place_possible=*/true);
  EXPECT_TRUE(plan.in_place);
  ASSERT_EQ(plan.slabs.size(), 2u);
  EXPECT_EQ(plan.slabs[0].digest, 0u);
  EXPECT_EQ(plan.slabs[0].bytes, 4 * 4 * 4);
  EXPECT_EQ(plan.slabs[1].digest, 1u);
  EXPECT_EQ(plan.slabs[1].slab, (ChunkStorageMetadata{{4, 0}, {2, 4}}));
  EXPECT_EQ(plan.slabs[1].part, plan.slabs[1].slab);
  EXPECT_EQ(plan.covered, 24);
  // A destination that cannot take the bytes as stored: slab by slab.
  EXPECT_FALSE(plan_slab_reads(item({0, 0}, {6, 4}, {0}), storage(), kChecksums, false).in_place);
}

TEST(SlabReads, AResharedBlockReadsEveryTouchedSlabWholeAndTakesItsPart) {
  // Rows [3, 8), columns [1, 3): slabs [0, 4), [4, 6) of chunk 0 and [6, 10) of chunk 1.
  const auto plan = plan_slab_reads(item({3, 1}, {5, 2}, {0, 1}), storage(), kChecksums, true);
  EXPECT_FALSE(plan.in_place);
  ASSERT_EQ(plan.slabs.size(), 3u);
  EXPECT_EQ(plan.slabs[0].slab, (ChunkStorageMetadata{{0, 0}, {4, 4}}));
  EXPECT_EQ(plan.slabs[0].part, (ChunkStorageMetadata{{3, 1}, {1, 2}}));
  EXPECT_EQ(plan.slabs[1].part, (ChunkStorageMetadata{{4, 1}, {2, 2}}));
  EXPECT_EQ(plan.slabs[2].chunk, 1u);
  EXPECT_EQ(plan.slabs[2].digest, 2u);
  EXPECT_EQ(plan.slabs[2].part, (ChunkStorageMetadata{{6, 1}, {2, 2}}));
  EXPECT_EQ(plan.covered, volume({5, 2}));
}

TEST(SlabReads, OverlappingChunksFillMoreThanTheBlock) {
  // A damaged file whose chunks overlap: the parts cover rows 4-5 twice.
  auto damaged = storage();
  damaged.chunks[1] = {{4, 0}, {6, 4}};
  const auto plan = plan_slab_reads(item({0, 0}, {10, 4}, {0, 1}), damaged, kChecksums, true);
  EXPECT_NE(plan.covered, 40);
}

TEST(SlabReads, AScalarIsOneSlab) {
  TensorStorageMetadata scalar;
  scalar.properties.dtype = DType::Float64;
  scalar.chunks = {{{}, {}}};
  ReadItem r = item({}, {}, {0});
  r.dtype = DType::Float64;
  const auto plan = plan_slab_reads(r, scalar, TensorChecksums{{1}, {99}}, true);
  EXPECT_TRUE(plan.in_place);
  ASSERT_EQ(plan.slabs.size(), 1u);
  EXPECT_EQ(plan.slabs[0].bytes, 8);
  EXPECT_EQ(plan.covered, 1);
}

}  // namespace
}  // namespace h5dcp::detail
