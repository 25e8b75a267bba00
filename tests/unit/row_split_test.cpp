// plan/row_split: who writes which rows when an export spreads tensors over
// ranks; and the DCP metadata pickle written and read back (pure data).

#include <gtest/gtest.h>

#include <map>

#include "formats/dcp_metadata.hpp"
#include "h5dcp/error.hpp"
#include "plan/row_split.hpp"

namespace h5dcp::detail {
namespace {

TEST(RowSplit, LargeTensorsSplitLikeTorchChunkSmallOnesGoToTheLeastLoaded) {
  // 10 rows of 4 floats (160 bytes) split 4/4/2 over 3 ranks; then whole tensors
  // of 16, 8 and 4 bytes go to the least loaded rank at each step.
  const std::vector<RowSplitTensor> tensors{{{10, 4}, 4}, {{4}, 4}, {{2}, 4}, {{}, 4}, {{0, 3}, 4}};
  const auto pieces = split_rows(tensors, 100, 3);
  ASSERT_EQ(pieces.size(), 6u);
  EXPECT_EQ(pieces[0].rank, 0);
  EXPECT_EQ(pieces[0].row, 0);
  EXPECT_EQ(pieces[0].rows, 4);
  EXPECT_EQ(pieces[1].rank, 1);
  EXPECT_EQ(pieces[1].row, 4);
  EXPECT_EQ(pieces[2].rank, 2);
  EXPECT_EQ(pieces[2].row, 8);
  EXPECT_EQ(pieces[2].rows, 2);
  EXPECT_EQ(pieces[3].tensor, 1u);
  EXPECT_EQ(pieces[3].rank, 2);  // rank 2 had 32 bytes, the others 64
  EXPECT_EQ(pieces[4].tensor, 2u);
  EXPECT_EQ(pieces[4].rank, 2);     // 48 < 64
  EXPECT_EQ(pieces[5].tensor, 3u);  // the 0-d tensor: one piece of one row
  EXPECT_EQ(pieces[5].rows, 1);
  // Every row of every non-empty tensor is written exactly once.
  std::map<std::size_t, std::int64_t> rows;
  for (const auto& p : pieces) rows[p.tensor] += p.rows;
  EXPECT_EQ(rows[0], 10);
  EXPECT_EQ(rows.count(4), 0u);  // the empty tensor has no piece
  EXPECT_EQ(row_bytes({10, 4}, 4), 16);
  EXPECT_EQ(row_bytes({}, 8), 8);
}

TEST(RowSplit, APiecesBoxIsItsRowsWithEveryOtherDimensionWhole) {
  const auto box = rows_box({10, 4, 3}, RowPiece{0, 7, 3, 1});
  EXPECT_EQ(box.offsets, (Shape{7, 0, 0}));
  EXPECT_EQ(box.sizes, (Shape{3, 4, 3}));
  const auto scalar = rows_box({}, RowPiece{0, 0, 1, 0});
  EXPECT_TRUE(scalar.offsets.empty());
  EXPECT_TRUE(scalar.sizes.empty());
}

TEST(RowSplit, OneRankWritesEverythingWhole) {
  const auto pieces = split_rows({{{1000, 1000}, 8}, {{3}, 1}}, 1, 1);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].rows, 1000);
  EXPECT_EQ(pieces[1].rank, 0);
}

TEST(DcpMetadata, WrittenMetadataReadsBackTheSame) {
  DcpMetadata md;
  md.version = kDcpMetadataVersion;
  DcpTensor t{DType::BFloat16, {4, 6}, {}};
  t.chunks.push_back({{{0, 0}, {2, 6}}, {"__0_0.distcp", 0, 900}});
  t.chunks.push_back({{{2, 0}, {2, 6}}, {"__1_0.distcp", 0, 900}});
  md.tensors["model.w"] = t;
  md.values["step"] = {"__0_0.distcp", 900, 300};
  md.paths["model.w"] = {{false, "model", 0}, {false, "w", 0}};
  md.paths["step"] = {{false, "step", 0}};
  const auto back = read_dcp_metadata(write_dcp_metadata(md), "'test'");
  EXPECT_EQ(back.version, "1.0.0");
  ASSERT_EQ(back.tensors.count("model.w"), 1u);
  const auto& w = back.tensors.at("model.w");
  EXPECT_EQ(w.dtype, DType::BFloat16);
  EXPECT_EQ(w.size, (Shape{4, 6}));
  ASSERT_EQ(w.chunks.size(), 2u);
  EXPECT_EQ(w.chunks[1].box.offsets, (Shape{2, 0}));
  EXPECT_EQ(w.chunks[1].item.relative_path, "__1_0.distcp");
  EXPECT_EQ(back.values.at("step").offset, 900u);
  EXPECT_EQ(back.paths.at("model.w").size(), 2u);
  EXPECT_EQ(back.paths.at("model.w")[1].key, "w");
}

TEST(DcpMetadata, ChunksThatLeaveAGapAreRefused) {
  DcpMetadata md;
  md.version = kDcpMetadataVersion;
  md.tensors["w"] = DcpTensor{DType::Float32, {4}, {{{{0}, {2}}, {"__0_0.distcp", 0, 10}}}};
  try {
    read_dcp_metadata(write_dcp_metadata(md), "'test'");
    FAIL() << "a gap was accepted";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace h5dcp::detail
