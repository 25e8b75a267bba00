// The plan's per-rank work (plan/block_writes.hpp): which blocks a rank
// writes, the checksum slabs each is hashed in, and the staging pieces.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "plan/block_writes.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {
namespace {

// "a": float32 [600, 1024] in two row blocks (rank 0, rank 1); "b": an
// empty int64 tensor (rank 1); "c": a float64 scalar (rank 0).
GlobalSavePlan two_rank_plan() {
  GlobalSavePlan plan;
  plan.world_size = 2;
  PlannedTensor a{"a", DType::Float32, {600, 1024}, true, {}};
  a.chunks.push_back(PlannedChunk{{{0, 0}, {300, 1024}}, 0, 0});
  a.chunks.push_back(PlannedChunk{{{300, 0}, {300, 1024}}, 1, 0});
  PlannedTensor b{"b", DType::Int64, {0}, false, {PlannedChunk{{{0}, {0}}, 1, 0}}};
  PlannedTensor c{"c", DType::Float64, {}, false, {PlannedChunk{{{}, {}}, 0, 0}}};
  plan.tensors = {a, b, c};
  return plan;
}

TEST(BlockWrites, EachRankGetsItsBlocksInPlanOrderWithTheirSlabs) {
  const auto plan = two_rank_plan();
  const auto mine = blocks_written_by(plan, 0);
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_EQ(mine[0].tensor, 0u);
  EXPECT_EQ(mine[0].chunk, 0u);
  EXPECT_EQ(mine[0].bytes, 300 * 1024 * 4);
  // 1 MiB slabs of whole 4 KiB rows: 256 rows, then the 44 left.
  EXPECT_EQ(mine[0].slab_rows, 256);
  EXPECT_EQ(mine[0].slab_bytes, (std::vector<std::int64_t>{256 * 4096, 44 * 4096}));
  EXPECT_EQ(mine[1].tensor, 2u);
  EXPECT_EQ(mine[1].bytes, 8);
  EXPECT_EQ(mine[1].slab_bytes, std::vector<std::int64_t>{8});

  const auto theirs = blocks_written_by(plan, 1);
  ASSERT_EQ(theirs.size(), 2u);
  EXPECT_EQ(theirs[0].chunk, 1u);
  EXPECT_EQ(theirs[1].tensor, 1u);
  EXPECT_EQ(theirs[1].bytes, 0);
  EXPECT_TRUE(theirs[1].slab_bytes.empty());
  EXPECT_TRUE(blocks_written_by(plan, 2).empty());
}

// The sizes alone, for every rank in one pass: those of the rank's blocks.
TEST(BlockWrites, BlockBytesByRankAreEachRanksBlocksInOrder) {
  auto plan = two_rank_plan();
  // A third rank that writes nothing, and a chunk of "a" moved to rank 1 so
  // that a rank writes two blocks of one tensor.
  plan.world_size = 3;
  plan.tensors[0].chunks.push_back(PlannedChunk{{{600, 0}, {0, 1024}}, 1, 0});
  const auto by_rank = block_bytes_by_rank(plan);
  ASSERT_EQ(by_rank.size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<std::int64_t> expected;
    for (const auto& block : blocks_written_by(plan, rank)) expected.push_back(block.bytes);
    EXPECT_EQ(by_rank[static_cast<std::size_t>(rank)], expected) << "rank " << rank;
  }
  EXPECT_EQ(by_rank[0], (std::vector<std::int64_t>{300 * 1024 * 4, 8}));
  EXPECT_EQ(by_rank[1], (std::vector<std::int64_t>{300 * 1024 * 4, 0, 0}));
  EXPECT_TRUE(by_rank[2].empty());
}

TEST(BlockWrites, StreamedAndWholeChecksumsAgreeAndPinTheDamagedSlab) {
  const auto plan = two_rank_plan();
  const auto block = blocks_written_by(plan, 1)[0];
  std::vector<unsigned char> bytes(static_cast<std::size_t>(block.bytes));
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i * 131 + 7);
  const auto whole = checksum_block(block, bytes.data());
  EXPECT_EQ(whole.tensor, 0u);
  EXPECT_EQ(whole.chunk, 1u);
  EXPECT_EQ(whole.rows, 256);
  ASSERT_EQ(whole.digests.size(), 2u);

  // Fed in uneven pieces (as staging pieces arrive): the same digests.
  auto hasher = block_hasher(block);
  const std::int64_t cuts[] = {1, 4095, 1048577, block.bytes};
  std::int64_t done = 0;
  for (const auto cut : cuts) {
    hasher.update(bytes.data() + done, cut - done);
    done = cut;
  }
  EXPECT_EQ(block_checksums(block, hasher).digests, whole.digests);

  // One byte of the second slab changed: only its digest changes.
  bytes[static_cast<std::size_t>(256 * 4096 + 5)] ^= 1;
  const auto damaged = checksum_block(block, bytes.data());
  EXPECT_EQ(damaged.digests[0], whole.digests[0]);
  EXPECT_NE(damaged.digests[1], whole.digests[1]);
}

TEST(BlockWrites, StagingPiecesCoverEveryBlockInOrder) {
  const auto plan = two_rank_plan();
  const auto blocks = blocks_written_by(plan, 0);
  const std::int64_t limit = 512 * 1024;
  const auto pieces = staging_pieces(plan, blocks, limit);
  std::vector<std::int64_t> covered(blocks.size(), 0);
  std::size_t last_block = 0;
  for (const auto& piece : pieces) {
    EXPECT_LE(piece.bytes, limit);
    EXPECT_GE(piece.block, last_block);  // blocks in order, a block's pieces together
    last_block = piece.block;
    const auto& t = plan.tensors[blocks[piece.block].tensor];
    EXPECT_EQ(piece.bytes, volume(piece.box.sizes) * static_cast<std::int64_t>(dtype_size(t.dtype)));
    covered[piece.block] += piece.bytes;
  }
  EXPECT_EQ(covered[0], blocks[0].bytes);
  EXPECT_EQ(covered[1], blocks[1].bytes);
  EXPECT_EQ(pieces.size(), 4u);  // 300 rows of 4 KiB in runs of 128 rows (3), and the scalar
  // Large enough for the whole block: one piece per block; the empty
  // tensor of rank 1 has none.
  EXPECT_EQ(staging_pieces(plan, blocks, std::int64_t{2} << 20).size(), 2u);
  EXPECT_EQ(staging_pieces(plan, blocks_written_by(plan, 1), std::int64_t{2} << 20).size(), 1u);
}

}  // namespace
}  // namespace h5dcp::detail
