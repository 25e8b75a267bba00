// Async saves at 1-4 ranks: round trips, several saves in a row streaming
// through small reused staging memory, tensors changed right after save()
// returns, a background failure on one rank reaching every future, a save's
// own timeout, MPI used by the caller meanwhile, and shutdown with a save in
// flight.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;
using test::reference_tensor;

StateDict training_state(int rank, int size, std::int64_t seed) {
  return StateDict{{"w", test::grid_shards(reference_tensor({64, 33}, at::kFloat, seed), 4, 3, rank, size)},
                   {"b", reference_tensor({33}, at::kBFloat16, seed)},
                   {"meta", StateDict{{"step", seed}, {"name", "async"}}}};
}

void expect_checkpoint_holds(const std::string& path, std::int64_t seed) {
  const auto all = load_all(path);
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(all.at("w")), reference_tensor({64, 33}, at::kFloat, seed))) << path;
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(all.at("b")), reference_tensor({33}, at::kBFloat16, seed))) << path;
  EXPECT_EQ(std::get<std::int64_t>(value_at(all, "meta/step")), seed) << path;
}

TEST(AsyncSave, RoundTripsLikeASyncSave) {
  test::TempDir dir;
  AsyncSaver saver(MPI_COMM_WORLD);
  auto state = training_state(test::world_rank(), test::world_size(), 1);
  auto future = saver.save(state, dir.file("a.h5"));
  const auto result = future.get();
  EXPECT_EQ(result.metadata.world_size, test::world_size());
  expect_checkpoint_holds(dir.file("a.h5"), 1);
  EXPECT_EQ(saver.stats().staging_allocations, 1);
  EXPECT_GT(saver.stats().blocking_seconds, 0.0);
}

TEST(AsyncSave, SavesInARowStreamThroughSmallReusedStaging) {
  test::TempDir dir;
  // 4 KiB of staging for ~8 KiB of float32 per rank: pieces stream through.
  AsyncSaver saver(MPI_COMM_WORLD, AsyncOptions{4096});
  std::vector<std::future<SaveResult>> futures;
  for (std::int64_t seed = 1; seed <= 3; ++seed) {
    auto state = training_state(test::world_rank(), test::world_size(), seed);
    futures.push_back(saver.save(state, dir.file("s" + std::to_string(seed) + ".h5")));
    // The caller may change its tensors as soon as save() returns.
    for (auto& s : std::get<ShardedTensor>(state.at("w")).local_shards()) s.tensor.fill_(-1);
    std::get<at::Tensor>(state.at("b")).fill_(7);
    EXPECT_EQ(saver.stats().staging_bytes, 4096);
    EXPECT_EQ(saver.stats().staging_allocations, 1);
  }
  for (auto& f : futures) f.get();
  for (std::int64_t seed = 1; seed <= 3; ++seed)
    expect_checkpoint_holds(dir.file("s" + std::to_string(seed) + ".h5"), seed);
}

TEST(AsyncSave, TheCallerKeepsUsingMpiMeanwhile) {
  test::TempDir dir;
  AsyncSaver saver(MPI_COMM_WORLD, AsyncOptions{8192});
  auto state = training_state(test::world_rank(), test::world_size(), 4);
  auto future = saver.save(state, dir.file("m.h5"));
  for (int i = 0; i < 20; ++i) {
    int value = test::world_rank() + i;
    int sum = 0;
    MPI_Allreduce(&value, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    const int n = test::world_size();
    EXPECT_EQ(sum, n * (n - 1) / 2 + n * i);
  }
  future.get();
  expect_checkpoint_holds(dir.file("m.h5"), 4);
}

TEST(AsyncSave, ABackgroundFailureOnOneRankReachesEveryFuture) {
  test::TempDir dir;
  AsyncSaver saver(MPI_COMM_WORLD, AsyncOptions{4096});
  saver.save(training_state(test::world_rank(), test::world_size(), 5), dir.file("c.h5")).get();
  const int bad = test::world_size() - 1;
  for (const std::string point : {"save:write", "async:stage", "save:commit"}) {
    const int where = point == "save:commit" ? 0 : bad;
    // Set until the background is done: it reads the variable when it gets there.
    ::setenv("H5DCP_INJECT_FAULT", (point + "@" + std::to_string(where)).c_str(), 1);
    auto future = saver.save(training_state(test::world_rank(), test::world_size(), 6), dir.file("c.h5"));
    try {
      future.get();
      ADD_FAILURE() << point << ": expected a CheckpointError on rank " << test::world_rank();
    } catch (const CheckpointError& e) {
      EXPECT_EQ(e.failures().count(where), 1u) << point << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("injected fault at " + point), std::string::npos) << e.what();
    }
    ::unsetenv("H5DCP_INJECT_FAULT");
  }
  expect_checkpoint_holds(dir.file("c.h5"), 5);  // the older checkpoint is intact
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"c.h5"});
  // And the saver still works.
  saver.save(training_state(test::world_rank(), test::world_size(), 8), dir.file("c.h5")).get();
  expect_checkpoint_holds(dir.file("c.h5"), 8);
}

TEST(AsyncSave, ASavesOwnTimeoutReplacesTheSaversForThatSave) {
  if (test::world_size() == 1) GTEST_SKIP() << "needs two ranks";
  test::TempDir dir;
  const int rank = test::world_rank();
  const int stalled = test::world_size() - 1;
  AsyncSaver saver(MPI_COMM_WORLD, AsyncOptions{1 << 20});  // the saver's timeout: the default, 1800 s
  // A per-save timeout must agree like every option (and a refusal leaves
  // the saver usable).
  SaveOptions odd;
  odd.timeout_seconds = rank == stalled ? 7 : 30;
  try {
    saver.save(training_state(rank, test::world_size(), 12), dir.file("t.h5"), odd).get();
    ADD_FAILURE() << "expected a UsageError on rank " << rank;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(stalled) + " has timeout_seconds=7, rank 0 has 30"),
              std::string::npos)
        << e.what();
  }
  SaveOptions generous;
  generous.timeout_seconds = 30;
  saver.save(training_state(rank, test::world_size(), 12), dir.file("t.h5"), generous).get();
  expect_checkpoint_holds(dir.file("t.h5"), 12);

  // A stall past a 1 s per-save timeout: the others give up naming the
  // stalled rank instead of waiting for it as the saver's timeout would. As
  // in Deadline.AStalledRankIsNamedAndNobodyWaitsForever, a waiting rank
  // gives up within 2 * timeout + 1 s of reaching the step; the stall is
  // longer by a margin for a slow start (4 ranks on 2 cores). Last: after a
  // timeout the saver's communicator is unusable (see README, Deadlines).
  constexpr double kTimeout = 1;
  constexpr double kStall = 2 * kTimeout + 1 + 6;
  ::setenv("H5DCP_INJECT_FAULT", ("save:plan@" + std::to_string(stalled) + "~" + std::to_string(kStall)).c_str(), 1);
  SaveOptions options;
  options.timeout_seconds = kTimeout;
  const auto started = std::chrono::steady_clock::now();
  try {
    saver.save(training_state(rank, test::world_size(), 13), dir.file("t.h5"), options).get();
    ADD_FAILURE() << "expected a CheckpointError on rank " << rank;
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.step(), "save:plan") << e.what();
    if (rank != stalled) EXPECT_EQ(e.failures().count(stalled), 1u) << e.what();
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (rank != stalled) EXPECT_LT(waited, kStall) << "rank " << rank;
  ::unsetenv("H5DCP_INJECT_FAULT");
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"t.h5"});
  expect_checkpoint_holds(dir.file("t.h5"), 12);  // the older checkpoint is intact
}

TEST(AsyncSave, ShutdownWithASaveInFlightFinishesIt) {
  test::TempDir dir;
  {
    AsyncSaver saver(MPI_COMM_WORLD, AsyncOptions{4096});
    saver.save(training_state(test::world_rank(), test::world_size(), 9), dir.file("late.h5"));
  }  // destroyed with the save in flight: it completes first
  expect_checkpoint_holds(dir.file("late.h5"), 9);
}

TEST(AsyncSave, TheConvenienceFunctionAndLoadsInterleave) {
  test::TempDir dir;
  auto f1 = async_save(training_state(test::world_rank(), test::world_size(), 10), dir.file("x.h5"));
  // A load right away waits for the save in flight (one thread in HDF5).
  f1.get();
  expect_checkpoint_holds(dir.file("x.h5"), 10);
  auto f2 = async_save(training_state(test::world_rank(), test::world_size(), 11), dir.file("y.h5"));
  expect_checkpoint_holds(dir.file("x.h5"), 10);  // while y.h5 may still be writing
  f2.get();
  expect_checkpoint_holds(dir.file("y.h5"), 11);
  finish_async_saves();
}

}  // namespace
}  // namespace h5dcp
