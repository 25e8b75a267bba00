// Plan reuse (SaveOptions::plan_cache) at 1-4 ranks: a save whose sharding
// did not change reuses the cached plan and writes the same file a fresh plan
// would (new tensor data and values included); any change on any rank plans
// anew; values must still agree; every rank passes a cache or none.

#include <gtest/gtest.h>

#include "h5dcp/h5dcp.hpp"
#include "plan/codec.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;

const std::vector<std::int64_t> kShape{13, 6};

at::Tensor full_w(std::int64_t step) { return test::reference_tensor(kShape, at::kFloat, step); }

// Rows of w, a replicated bias, values; `note` decides a value's size.
StateDict state_at(std::int64_t step, const std::string& note = "n") {
  const int rank = test::world_rank();
  const auto cuts = test::uneven_cuts(kShape[0], test::world_size());
  const auto rows = full_w(step).narrow(0, cuts[rank], cuts[rank + 1] - cuts[rank]).clone();
  return StateDict{
      {"w", ShardedTensor(kShape, {Shard{rows, {cuts[rank], 0}}})},
      {"b", test::reference_tensor({5}, at::kBFloat16, step)},
      {"step", step},
      {"lr", 0.5 / static_cast<double>(step + 1)},
      {"note", note},
  };
}

// Loads `path` and checks it holds state_at(step, note) bit for bit.
void expect_holds(const std::string& path, std::int64_t step, const std::string& note = "n") {
  auto all = load_all(path);
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(all.at("w")), full_w(step))) << path;
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(all.at("b")), test::reference_tensor({5}, at::kBFloat16, step)))
      << path;
  EXPECT_EQ(std::get<std::int64_t>(all.at("step")), step) << path;
  EXPECT_EQ(std::get<double>(all.at("lr")), 0.5 / static_cast<double>(step + 1)) << path;
  EXPECT_EQ(std::get<std::string>(all.at("note")), note) << path;
}

// The metadata's encoding without its time of creation: the layout.
detail::Bytes layout_of(Metadata metadata) {
  metadata.created.clear();
  return detail::encode(metadata);
}

SaveOptions with_cache(SavePlanCache& cache) {
  SaveOptions options;
  options.plan_cache = &cache;
  return options;
}

TEST(PlanCache, TheSecondSaveReusesThePlanAndWritesWhatAFreshPlanWould) {
  test::TempDir dir;
  SavePlanCache cache;
  const auto first = save(state_at(1), dir.file("1.h5"), with_cache(cache));
  EXPECT_FALSE(first.plan_reused);
  const auto second = save(state_at(2), dir.file("2.h5"), with_cache(cache));
  EXPECT_TRUE(second.plan_reused);
  EXPECT_EQ(cache.planned(), 1);
  EXPECT_EQ(cache.reused(), 1);
  expect_holds(dir.file("1.h5"), 1);
  expect_holds(dir.file("2.h5"), 2);

  // The same save planned without a cache: the same layout and writers.
  const auto fresh = save(state_at(2), dir.file("fresh.h5"));
  EXPECT_FALSE(fresh.plan_reused);
  EXPECT_EQ(layout_of(second.metadata), layout_of(fresh.metadata));
  EXPECT_EQ(second.bytes_per_rank, fresh.bytes_per_rank);
  EXPECT_EQ(layout_of(read_metadata(dir.file("2.h5"))), layout_of(read_metadata(dir.file("fresh.h5"))));
  // Each save has its own time, not the cached one's.
  EXPECT_NE(second.metadata.created, "");
  EXPECT_EQ(read_metadata(dir.file("2.h5")).created, second.metadata.created);
}

TEST(PlanCache, AChangeOnAnyRankPlansAnewAndKeepsTheNewPlan) {
  test::TempDir dir;
  SavePlanCache cache;
  save(state_at(1), dir.file("1.h5"), with_cache(cache));
  // Only the last rank holds one more tensor: its layout changed, the
  // others' did not (at 2+ ranks a mix of offers, planned in a second round).
  auto changed = state_at(2);
  const bool last = test::world_rank() == test::world_size() - 1;
  if (last) changed["extra"] = test::reference_tensor({3}, at::kInt, 9);
  EXPECT_FALSE(save(changed, dir.file("2.h5"), with_cache(cache)).plan_reused);
  expect_holds(dir.file("2.h5"), 2);
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(load_all(dir.file("2.h5")).at("extra")),
                            test::reference_tensor({3}, at::kInt, 9)));
  // The new plan is kept: the same layout again reuses it.
  auto again = state_at(3);
  if (last) again["extra"] = test::reference_tensor({3}, at::kInt, 10);
  EXPECT_TRUE(save(again, dir.file("3.h5"), with_cache(cache)).plan_reused);
  expect_holds(dir.file("3.h5"), 3);
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(load_all(dir.file("3.h5")).at("extra")),
                            test::reference_tensor({3}, at::kInt, 10)));
  // A value of another size is another dataset: planned anew.
  EXPECT_FALSE(save(state_at(4, "longer"), dir.file("4.h5"), with_cache(cache)).plan_reused);
  expect_holds(dir.file("4.h5"), 4, "longer");
  EXPECT_EQ(cache.planned(), 3);
  EXPECT_EQ(cache.reused(), 1);
}

TEST(PlanCache, AClearedCacheOnOneRankPlansAnewEverywhere) {
  test::TempDir dir;
  SavePlanCache cache;
  save(state_at(1), dir.file("1.h5"), with_cache(cache));
  if (test::world_rank() == 0) cache.clear();
  EXPECT_FALSE(save(state_at(2), dir.file("2.h5"), with_cache(cache)).plan_reused);
  EXPECT_TRUE(save(state_at(3), dir.file("3.h5"), with_cache(cache)).plan_reused);
  expect_holds(dir.file("2.h5"), 2);
  expect_holds(dir.file("3.h5"), 3);
  // A moved-from cache plans anew too, and the moved-to one keeps the plan.
  SavePlanCache moved = std::move(cache);
  EXPECT_TRUE(save(state_at(4), dir.file("4.h5"), with_cache(moved)).plan_reused);
  EXPECT_FALSE(save(state_at(5), dir.file("5.h5"), with_cache(cache)).plan_reused);  // NOLINT(bugprone-use-after-move)
  expect_holds(dir.file("5.h5"), 5);
}

TEST(PlanCache, ValuesMustStillAgreeWhenThePlanIsReused) {
  if (test::world_size() < 2) GTEST_SKIP() << "needs two ranks to disagree";
  test::TempDir dir;
  SavePlanCache cache;
  save(state_at(1), dir.file("a.h5"), with_cache(cache));
  // Same size, other bytes on rank 1: the layout digests match, the values not.
  auto state = state_at(2);
  if (test::world_rank() == 1) state["lr"] = 0.125;
  const auto error = test::expect_checkpoint_error([&] { save(state, dir.file("a.h5"), with_cache(cache)); });
  EXPECT_NE(std::string(error.what()).find("ranks disagree on the value of 'lr' (ranks 0 and 1)"), std::string::npos)
      << error.what();
  EXPECT_NE(std::string(error.what()).find("save:plan"), std::string::npos) << error.what();
  expect_holds(dir.file("a.h5"), 1);  // the previous checkpoint is intact
  // The cache is still good for the next agreeing save.
  EXPECT_TRUE(save(state_at(3), dir.file("a.h5"), with_cache(cache)).plan_reused);
  expect_holds(dir.file("a.h5"), 3);
}

TEST(PlanCache, EveryRankPassesACacheOrNone) {
  if (test::world_size() < 2) GTEST_SKIP() << "needs two ranks to differ";
  test::TempDir dir;
  SavePlanCache cache;
  auto options = test::world_rank() == 1 ? SaveOptions{} : with_cache(cache);
  try {
    save(state_at(1), dir.file("a.h5"), options);
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("plan_cache"), std::string::npos) << e.what();
  }
}

TEST(PlanCache, AsyncSavesReuseThePlan) {
  test::TempDir dir;
  SavePlanCache cache;
  auto options = test::staging_of(1 << 20);
  options.plan_cache = &cache;
  auto first = async_save(state_at(1), dir.file("1.h5"), options);
  auto second = async_save(state_at(2), dir.file("2.h5"), options);
  EXPECT_FALSE(first.get().plan_reused);
  EXPECT_TRUE(second.get().plan_reused);
  auto staged = async_stage_and_save(state_at(3), dir.file("3.h5"), options);
  staged.staged.wait();
  EXPECT_TRUE(staged.saved.get().plan_reused);
  finish_async_saves();
  for (std::int64_t step = 1; step <= 3; ++step) expect_holds(dir.file(std::to_string(step) + ".h5"), step);
}

}  // namespace
}  // namespace h5dcp
