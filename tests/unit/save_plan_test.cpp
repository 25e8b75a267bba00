// The pure planner, driven directly: no MPI, no HDF5, no torch.

#include <gtest/gtest.h>

#include "h5dcp/error.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/save_plan.hpp"

namespace h5dcp::detail {
namespace {

WriteItem shard(const std::string& fqn, Shape global, Shape offsets, Shape sizes, std::size_t index = 0,
                DType dtype = DType::Float32) {
  return WriteItem{
      MetadataIndex{fqn, offsets, index}, WriteItemType::Shard, dtype, std::move(global), {offsets, sizes}, {}, {}};
}

WriteItem plain(const std::string& fqn, Shape shape, DType dtype = DType::Float32) {
  return WriteItem{MetadataIndex{fqn, std::nullopt, std::nullopt},
                   WriteItemType::Tensor,
                   dtype,
                   shape,
                   {Shape(shape.size(), 0), shape},
                   {},
                   {}};
}

WriteItem value(const std::string& fqn, std::string payload, std::string encoding = "str") {
  return WriteItem{MetadataIndex{fqn, std::nullopt, std::nullopt},
                   WriteItemType::Value,
                   DType::UInt8,
                   {},
                   {},
                   std::move(encoding),
                   std::move(payload)};
}

std::string error_of(const std::vector<SavePlan>& plans) {
  try {
    create_global_save_plan(plans);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ChunkGeometry, LinearOffsetsAreRowMajor) {
  const Shape cube{4, 5, 6};
  const auto strides = contiguous_strides(cube);
  EXPECT_EQ(strides, (Shape{30, 6, 1}));
  EXPECT_EQ(linear_offset({0, 0, 0}, strides), 0);
  EXPECT_EQ(linear_offset({1, 2, 3}, strides), 30 + 12 + 3);
  EXPECT_EQ(linear_offset({3, 4, 5}, strides), 4 * 5 * 6 - 1);
  EXPECT_EQ(linear_offset({}, {}), 0);  // a 0-d tensor's one element
}

TEST(ChunkGeometry, ContiguousInTheFileMeansRowBlocks) {
  const Shape matrix{8, 4};
  EXPECT_TRUE(is_contiguous_in({{2, 0}, {3, 4}}, matrix));   // rows
  EXPECT_TRUE(is_contiguous_in({{0, 0}, {8, 4}}, matrix));   // all of it
  EXPECT_TRUE(is_contiguous_in({{3, 1}, {1, 2}}, matrix));   // part of one row
  EXPECT_TRUE(is_contiguous_in({{0, 0}, {0, 4}}, matrix));   // empty
  EXPECT_FALSE(is_contiguous_in({{0, 0}, {8, 2}}, matrix));  // columns
  EXPECT_FALSE(is_contiguous_in({{3, 1}, {2, 2}}, matrix));  // a 2 x 2 tile
  const Shape cube{4, 5, 6};
  EXPECT_TRUE(is_contiguous_in({{1, 0, 0}, {2, 5, 6}}, cube));
  EXPECT_TRUE(is_contiguous_in({{1, 2, 0}, {1, 3, 6}}, cube));
  EXPECT_TRUE(is_contiguous_in({{1, 2, 3}, {1, 1, 2}}, cube));
  EXPECT_FALSE(is_contiguous_in({{1, 2, 0}, {2, 3, 6}}, cube));
  EXPECT_FALSE(is_contiguous_in({{1, 2, 3}, {1, 2, 2}}, cube));
  EXPECT_TRUE(is_contiguous_in({{}, {}}, Shape{}));  // a 0-d tensor
}

TEST(SavePlan, RowShardsTileAndKeepTheirWriters) {
  const std::vector<SavePlan> plans{{{shard("w", {10, 4}, {0, 0}, {6, 4})}}, {{shard("w", {10, 4}, {6, 0}, {4, 4})}}};
  const auto plan = create_global_save_plan(plans);
  ASSERT_EQ(plan.tensors.size(), 1u);
  const auto& t = plan.tensors[0];
  EXPECT_EQ(t.fqn, "w");
  EXPECT_EQ(t.global_shape, (Shape{10, 4}));
  ASSERT_EQ(t.chunks.size(), 2u);
  EXPECT_EQ(t.chunks[0].writer, 0);
  EXPECT_EQ(t.chunks[1].writer, 1);
  EXPECT_EQ(plan.bytes_per_rank(), (std::vector<std::int64_t>{6 * 4 * 4, 4 * 4 * 4}));
}

TEST(SavePlan, ReplicatedValuesAreWrittenOnceAndBalanced) {
  // Four plain tensors on each of two ranks: each is written exactly once and
  // the bytes are split evenly (largest first to the least loaded rank).
  std::vector<SavePlan> plans(2);
  for (auto& p : plans)
    for (const auto& [name, rows] :
         std::vector<std::pair<std::string, std::int64_t>>{{"a", 8}, {"b", 4}, {"c", 4}, {"d", 8}})
      p.items.push_back(plain(name, {rows, 2}));
  const auto plan = create_global_save_plan(plans);
  ASSERT_EQ(plan.tensors.size(), 4u);
  for (const auto& t : plan.tensors) EXPECT_EQ(t.chunks.size(), 1u) << t.fqn;
  const auto bytes = plan.bytes_per_rank();
  EXPECT_EQ(bytes[0], bytes[1]);
  EXPECT_EQ(bytes[0] + bytes[1], (8 + 4 + 4 + 8) * 2 * 4);
}

TEST(SavePlan, ReplicatedShardsGoToTheLeastLoadedHolder) {
  // Rank 0 alone holds a big shard; the replicated small shard must go to rank 1.
  const std::vector<SavePlan> plans{
      {{shard("w", {12}, {0}, {10}, 0), shard("w", {12}, {10}, {2}, 1)}},
      {{shard("w", {12}, {10}, {2}, 0)}},
  };
  const auto plan = create_global_save_plan(plans);
  const auto& chunks = plan.tensors.at(0).chunks;
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[1].chunk.offsets, (Shape{10}));
  EXPECT_EQ(chunks[1].writer, 1);
  EXPECT_EQ(chunks[1].writer_shard_index, 0u);
}

TEST(SavePlan, OverlapIsRefusedWithOffsets) {
  const std::vector<SavePlan> plans{{{shard("layer.w", {10, 4}, {0, 0}, {6, 4})}},
                                    {{shard("layer.w", {10, 4}, {5, 0}, {5, 4})}}};
  const auto message = error_of(plans);
  EXPECT_NE(message.find("'layer.w'"), std::string::npos) << message;
  EXPECT_NE(message.find("overlap"), std::string::npos) << message;
  EXPECT_NE(message.find("[0:6, 0:4]"), std::string::npos) << message;
  EXPECT_NE(message.find("[5:10, 0:4]"), std::string::npos) << message;
}

TEST(SavePlan, SameOffsetsDifferentSizesIsAnOverlap) {
  const std::vector<SavePlan> plans{{{shard("w", {10}, {0}, {4})}}, {{shard("w", {10}, {0}, {10})}}};
  EXPECT_NE(error_of(plans).find("overlap"), std::string::npos);
}

TEST(SavePlan, GapIsRefusedNamingAnUncoveredElement) {
  const std::vector<SavePlan> plans{{{shard("w", {4, 4}, {0, 0}, {2, 4})}}, {{shard("w", {4, 4}, {2, 0}, {2, 2})}}};
  const auto message = error_of(plans);
  EXPECT_NE(message.find("cover 12 of the 16 elements"), std::string::npos) << message;
  EXPECT_NE(message.find("element [2, 2]"), std::string::npos) << message;
}

TEST(SavePlan, RanksMustAgreeOnShapeDtypeAndKind) {
  EXPECT_NE(error_of({{{plain("w", {3})}}, {{plain("w", {4})}}}).find("ranks disagree on 'w'"), std::string::npos);
  EXPECT_NE(error_of({{{plain("w", {3})}}, {{plain("w", {3}, DType::Float64)}}}).find("float64"), std::string::npos);
  EXPECT_NE(error_of({{{plain("w", {4})}}, {{shard("w", {4}, {0}, {4})}}}).find("sharded"), std::string::npos);
}

TEST(SavePlan, GridWithManyShardsPerRankTiles) {
  // 5 x 3 grid of uneven blocks over [17, 10], dealt round-robin to 3 ranks.
  const Shape rows{0, 5, 9, 12, 15, 17};
  const Shape cols{0, 4, 7, 10};
  std::vector<SavePlan> plans(3);
  int block = 0;
  for (std::size_t r = 0; r + 1 < rows.size(); ++r)
    for (std::size_t c = 0; c + 1 < cols.size(); ++c, ++block)
      plans[block % 3].items.push_back(shard("g", {17, 10}, {rows[r], cols[c]},
                                             {rows[r + 1] - rows[r], cols[c + 1] - cols[c]},
                                             plans[block % 3].items.size()));
  const auto plan = create_global_save_plan(plans);
  EXPECT_EQ(plan.tensors.at(0).chunks.size(), 15u);
  const auto bytes = plan.bytes_per_rank();
  EXPECT_EQ(bytes[0] + bytes[1] + bytes[2], 17 * 10 * 4);
}

TEST(ValidateLocalPlan, ShardOutsideTheGlobalShapeIsNamed) {
  SavePlan p{{shard("w", {10, 4}, {8, 0}, {4, 4}, 2)}};
  try {
    validate_local_plan(p);
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("shard 2 of 'w'"), std::string::npos) << m;
    EXPECT_NE(m.find("[8:12, 0:4]"), std::string::npos) << m;
    EXPECT_NE(m.find("[10, 4]"), std::string::npos) << m;
  }
}

TEST(ValidateLocalPlan, RankMismatchAndMixedDtypesAreRefused) {
  EXPECT_THROW(validate_local_plan({{shard("w", {10, 4}, {0}, {10})}}), UsageError);
  EXPECT_THROW(validate_local_plan({{shard("w", {10}, {0}, {5}, 0), shard("w", {10}, {5}, {5}, 1, DType::Int32)}}),
               UsageError);
  EXPECT_NO_THROW(validate_local_plan({{shard("w", {10}, {0}, {5}, 0), shard("w", {10}, {5}, {5}, 1)}}));
}

TEST(SavePlan, ValuesAreWrittenOnceAndMustAgree) {
  std::vector<SavePlan> plans(3);
  for (auto& p : plans) p.items.push_back(value("note", "hello"));
  const auto plan = create_global_save_plan(plans);
  ASSERT_EQ(plan.values.size(), 1u);
  EXPECT_EQ(plan.values[0].payload, "hello");
  const auto bytes = plan.bytes_per_rank();
  EXPECT_EQ(bytes[0] + bytes[1] + bytes[2], 5);

  plans[2].items[0].payload = "other";
  const auto message = error_of(plans);
  EXPECT_NE(message.find("ranks disagree on the value of 'note' (ranks 0 and 2)"), std::string::npos) << message;
}

TEST(SavePlan, OneKindPerFqnAcrossRanks) {
  // A tensor on one rank, a value on another.
  auto message = error_of({{{plain("x", {2})}}, {{value("x", "1")}}});
  EXPECT_NE(message.find("ranks disagree on 'x'"), std::string::npos) << message;
  // A dict on one rank, a list on another.
  message = error_of({SavePlan{{}, {{"c", ContainerKind::Dict}}}, SavePlan{{}, {{"c", ContainerKind::List}}}});
  EXPECT_NE(message.find("rank 0 has a dict, rank 1 a list"), std::string::npos) << message;
  // A container on one rank, a leaf on another.
  message = error_of({SavePlan{{}, {{"c", ContainerKind::Dict}}}, SavePlan{{plain("c", {1})}, {}}});
  EXPECT_NE(message.find("ranks disagree on 'c'"), std::string::npos) << message;
}

TEST(SavePlan, ContainersAreMergedSortedAndNeedTheirParents) {
  const auto plan = create_global_save_plan(
      {SavePlan{{plain("m/w", {2})}, {{"m", ContainerKind::Dict}}},
       SavePlan{{value("o/0", "1", "int")}, {{"o", ContainerKind::List}, {"e", ContainerKind::Dict}}}});
  ASSERT_EQ(plan.containers.size(), 3u);
  EXPECT_EQ(plan.containers[0].first, "e");
  EXPECT_EQ(plan.containers[1].first, "m");
  EXPECT_EQ(plan.containers[2].first, "o");
  EXPECT_NE(error_of({SavePlan{{plain("m/w", {2})}, {}}}).find("not its container 'm'"), std::string::npos);
}

TEST(ChunkGeometry, IntersectAndVolume) {
  const ChunkStorageMetadata a{{0, 0}, {4, 4}};
  const ChunkStorageMetadata b{{2, 3}, {4, 4}};
  const auto i = intersect(a, b);
  ASSERT_TRUE(i.has_value());
  EXPECT_EQ(i->offsets, (Shape{2, 3}));
  EXPECT_EQ(i->sizes, (Shape{2, 1}));
  EXPECT_FALSE(intersect(a, ChunkStorageMetadata{{4, 0}, {1, 1}}).has_value());
  EXPECT_EQ(volume({}), 1);
  EXPECT_EQ(volume({3, 0}), 0);
}

TEST(ChunkGeometry, ZeroDimensionalAndEmptyTensorsTile) {
  EXPECT_NO_THROW(check_exact_tiling("s", {}, {ChunkStorageMetadata{}}));
  EXPECT_NO_THROW(check_exact_tiling("e", {0, 3}, {ChunkStorageMetadata{{0, 0}, {0, 3}}}));
}

}  // namespace
}  // namespace h5dcp::detail
