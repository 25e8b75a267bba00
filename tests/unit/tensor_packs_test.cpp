// plan/tensor_packs: which tensors of a save share a pack, and where each lies.

#include <gtest/gtest.h>

#include "plan/tensor_packs.hpp"

namespace h5dcp::detail {
namespace {

PlannedTensor whole(std::string fqn, DType dtype, Shape shape, int writer) {
  PlannedTensor t{std::move(fqn), dtype, shape, false, {}};
  t.chunks.push_back({{Shape(shape.size(), 0), shape}, writer, 0});
  return t;
}

GlobalSavePlan plan_of(std::vector<PlannedTensor> tensors) {
  GlobalSavePlan plan;
  plan.tensors = std::move(tensors);  // sorted by fqn, as a planner leaves them
  plan.world_size = 2;
  return plan;
}

TEST(TensorPacks, SmallWholeTensorsArePackedByDtypeThenWriterThenFqn) {
  const auto plan = plan_of({whole("a", DType::Float32, {4}, 1), whole("b", DType::Float32, {2, 3}, 0),
                             whole("c", DType::Int64, {}, 1), whole("d", DType::Float32, {5}, 1),
                             whole("e", DType::Float32, {1}, 0)});
  const auto packs = plan_tensor_packs(plan);
  ASSERT_EQ(packs.places.size(), 5u);
  for (const auto& p : packs.places) ASSERT_TRUE(p.has_value());
  // float32: rank 0's b (6) and e (1), then rank 1's a (4) and d (5).
  EXPECT_EQ(packs.places[1]->offset, 0);
  EXPECT_EQ(packs.places[4]->offset, 6);
  EXPECT_EQ(packs.places[0]->offset, 7);
  EXPECT_EQ(packs.places[3]->offset, 11);
  EXPECT_EQ(packs.places[3]->count, 5);
  EXPECT_EQ(packs.elements.at(DType::Float32), 16);
  // The 0-d tensor is one element of its own pack.
  EXPECT_EQ(packs.places[2]->dtype, DType::Int64);
  EXPECT_EQ(packs.places[2]->count, 1);
  EXPECT_EQ(packs.elements.at(DType::Int64), 1);
  // Each rank writes one range per pack.
  EXPECT_EQ(packs.ranges.at({DType::Float32, 0}).begin, 0);
  EXPECT_EQ(packs.ranges.at({DType::Float32, 0}).end, 7);
  EXPECT_EQ(packs.ranges.at({DType::Float32, 1}).begin, 7);
  EXPECT_EQ(packs.ranges.at({DType::Float32, 1}).end, 16);
  EXPECT_EQ(packs.ranges.count({DType::Int64, 0}), 0u);
}

TEST(TensorPacks, LargeShardedAndManyDimensionalTensorsKeepADatasetOfTheirOwn) {
  auto sharded = whole("s", DType::Float32, {4}, 0);
  sharded.sharded = true;
  sharded.chunks = {{{{0}, {2}}, 0, 0}, {{{2}, {2}}, 1, 0}};
  const auto plan =
      plan_of({whole("big", DType::Float32, {16 * 1024 + 1}, 0), whole("edge", DType::Float32, {16 * 1024}, 0), sharded,
               whole("nine", DType::Int8, Shape(9, 1), 0), whole("empty", DType::Int8, {0, 3}, 1)});
  const auto packs = plan_tensor_packs(plan);
  EXPECT_FALSE(packs.places[0].has_value());  // 64 KiB + 4 bytes
  ASSERT_TRUE(packs.places[1].has_value());   // exactly 64 KiB
  EXPECT_FALSE(packs.places[2].has_value());  // two chunks
  EXPECT_FALSE(packs.places[3].has_value());  // nine dimensions
  ASSERT_TRUE(packs.places[4].has_value());   // no elements: a place of none
  EXPECT_EQ(packs.places[4]->count, 0);
  EXPECT_EQ(packs.elements.at(DType::Int8), 0);
}

TEST(TensorPacks, ANegativeLimitPacksNothingAndAWholeShardIsPacked) {
  auto one_shard = whole("s", DType::BFloat16, {3, 2}, 1);
  one_shard.sharded = true;  // one shard covering all (one rank): saved whole
  const auto plan = plan_of({one_shard});
  EXPECT_TRUE(plan_tensor_packs(plan).places[0].has_value());
  const auto none = plan_tensor_packs(plan, -1);
  EXPECT_FALSE(none.places[0].has_value());
  EXPECT_TRUE(none.elements.empty());
  EXPECT_TRUE(none.ranges.empty());
}

}  // namespace
}  // namespace h5dcp::detail
