// Async saves at 1-4 ranks: round trips, several saves in a row streaming
// through small reused staging memory, tensors changed right after
// async_save() returns, staged whole and written in either io_mode, any
// coordinator, a new staging size, a background failure on one rank reaching
// every future, a save's timeout, MPI used by the caller meanwhile, and
// finishing with a save in flight; async_stage_and_save: the caller goes on
// before its blocks are copied, the copy on a thread of its own, the state
// dict kept alive by the save, a staging failure, the manager's; the
// staging thread runs as background work (SCHED_BATCH); the file is created
// only once a caller's whole-block copy is done.

#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

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

// Each test starts without staging memory, and leaves none behind.
class AsyncSave : public ::testing::Test {
 protected:
  void SetUp() override { finish_async_saves(); }
  void TearDown() override { finish_async_saves(); }
};

TEST_F(AsyncSave, RoundTripsLikeASyncSave) {
  test::TempDir dir;
  auto state = training_state(test::world_rank(), test::world_size(), 1);
  SaveFuture future = async_save(state, dir.file("a.h5"));
  const auto result = future.get();
  EXPECT_EQ(result.metadata.world_size, test::world_size());
  EXPECT_EQ(result.metadata.state_dict_metadata.count("w"), 1u);
  expect_checkpoint_holds(dir.file("a.h5"), 1);
  EXPECT_EQ(last_async_save_stats().staging_allocations, 1);
  EXPECT_EQ(last_async_save_stats().staging_bytes, std::int64_t{256} << 20);
  EXPECT_GT(last_async_save_stats().blocking_seconds, 0.0);
}

TEST_F(AsyncSave, SavesInARowStreamThroughSmallReusedStaging) {
  test::TempDir dir;
  // 4 KiB of staging for ~8 KiB of float32 per rank: pieces stream through.
  std::vector<SaveFuture> futures;
  for (std::int64_t seed = 1; seed <= 3; ++seed) {
    auto state = training_state(test::world_rank(), test::world_size(), seed);
    futures.push_back(async_save(state, dir.file("s" + std::to_string(seed) + ".h5"), test::staging_of(4096)));
    // The caller may change its tensors as soon as async_save() returns.
    for (auto& s : std::get<ShardedTensor>(state.at("w")).local_shards()) s.tensor.fill_(-1);
    std::get<at::Tensor>(state.at("b")).fill_(7);
    EXPECT_EQ(last_async_save_stats().staging_bytes, 4096);
    EXPECT_EQ(last_async_save_stats().staging_allocations, 1);
  }
  for (auto& f : futures) f.get();
  for (std::int64_t seed = 1; seed <= 3; ++seed)
    expect_checkpoint_holds(dir.file("s" + std::to_string(seed) + ".h5"), seed);
}

TEST_F(AsyncSave, BlocksStagedWholeAreWrittenInEitherIoModeByAnyCoordinator) {
  test::TempDir dir;
  // 1 MiB holds every rank's blocks whole: the background writes them like
  // save() (grid shards are scattered through the file: collectively in
  // IoMode::Collective), checksummed, and published by the coordinator.
  std::int64_t seed = 20;
  for (const auto mode : {IoMode::Collective, IoMode::Independent}) {
    for (const int coordinator : {0, test::world_size() - 1}) {
      auto options = test::staging_of(1 << 20);
      options.io_mode = mode;
      options.coordinator = coordinator;
      const auto path = dir.file("w" + std::to_string(seed) + ".h5");
      auto state = training_state(test::world_rank(), test::world_size(), seed);
      auto future = async_save(state, path, options);
      for (auto& s : std::get<ShardedTensor>(state.at("w")).local_shards()) s.tensor.fill_(-1);
      future.get();
      expect_checkpoint_holds(path, seed);
      EXPECT_TRUE(verify_checkpoint(path).ok()) << path;
      ++seed;
    }
  }
  EXPECT_EQ(last_async_save_stats().staging_allocations, 1);
}

TEST_F(AsyncSave, ANewStagingSizeAllocatesNewStagingMemory) {
  test::TempDir dir;
  async_save(training_state(test::world_rank(), test::world_size(), 30), dir.file("n.h5"), test::staging_of(8192))
      .get();
  async_save(training_state(test::world_rank(), test::world_size(), 31), dir.file("n.h5"), test::staging_of(8192))
      .get();
  EXPECT_EQ(last_async_save_stats().staging_allocations, 1);
  async_save(training_state(test::world_rank(), test::world_size(), 32), dir.file("n.h5"), test::staging_of(16384))
      .get();
  EXPECT_EQ(last_async_save_stats().staging_allocations, 2);
  EXPECT_EQ(last_async_save_stats().staging_bytes, 16384);
  expect_checkpoint_holds(dir.file("n.h5"), 32);
}

TEST_F(AsyncSave, TooLittleStagingIsAUsageErrorOnEveryRank) {
  test::TempDir dir;
  try {
    async_save(training_state(test::world_rank(), test::world_size(), 33), dir.file("u.h5"), test::staging_of(4095));
    ADD_FAILURE() << "expected a UsageError on rank " << test::world_rank();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("staging_bytes must be at least 4096, not 4095"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST_F(AsyncSave, TheCallerKeepsUsingMpiMeanwhile) {
  test::TempDir dir;
  auto state = training_state(test::world_rank(), test::world_size(), 4);
  auto future = async_save(state, dir.file("m.h5"), test::staging_of(8192));
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

TEST_F(AsyncSave, ABackgroundFailureOnOneRankReachesEveryFuture) {
  test::TempDir dir;
  async_save(training_state(test::world_rank(), test::world_size(), 5), dir.file("c.h5"), test::staging_of(4096)).get();
  const int bad = test::world_size() - 1;
  // Streamed (4 KiB) and staged whole (1 MiB, where a rank whose staging
  // failed must still take part in the collective writes).
  for (const std::int64_t bytes : {4096, 1 << 20}) {
    for (const std::string point : {"save:write", "async:stage", "save:commit"}) {
      const int where = point == "save:commit" ? 0 : bad;
      // Set until the background is done: it reads the variable when it gets there.
      ::setenv("H5DCP_INJECT_FAULT", (point + "@" + std::to_string(where)).c_str(), 1);
      auto future = async_save(training_state(test::world_rank(), test::world_size(), 6), dir.file("c.h5"),
                               test::staging_of(bytes));
      try {
        future.get();
        ADD_FAILURE() << point << ": expected a CheckpointError on rank " << test::world_rank();
      } catch (const CheckpointError& e) {
        EXPECT_EQ(e.failures().count(where), 1u) << point << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find("injected fault at " + point), std::string::npos) << e.what();
      }
      ::unsetenv("H5DCP_INJECT_FAULT");
    }
  }
  expect_checkpoint_holds(dir.file("c.h5"), 5);  // the older checkpoint is intact
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"c.h5"});
  // And async saves still work.
  async_save(training_state(test::world_rank(), test::world_size(), 8), dir.file("c.h5"), test::staging_of(4096)).get();
  expect_checkpoint_holds(dir.file("c.h5"), 8);
}

TEST_F(AsyncSave, ASavesTimeoutCoversEveryPhase) {
  if (test::world_size() == 1) GTEST_SKIP() << "needs two ranks";
  test::TempDir dir;
  const int rank = test::world_rank();
  const int stalled = test::world_size() - 1;
  // The timeout must agree like every option (and a refusal leaves async
  // saves usable).
  auto odd = test::staging_of(1 << 20);
  odd.timeout_seconds = rank == stalled ? 7 : 30;
  try {
    async_save(training_state(rank, test::world_size(), 12), dir.file("t.h5"), odd).get();
    ADD_FAILURE() << "expected a UsageError on rank " << rank;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("rank " + std::to_string(stalled) + " has timeout_seconds=7, rank 0 has 30"),
              std::string::npos)
        << e.what();
  }
  auto generous = test::staging_of(1 << 20);
  generous.timeout_seconds = 30;
  async_save(training_state(rank, test::world_size(), 12), dir.file("t.h5"), generous).get();
  expect_checkpoint_holds(dir.file("t.h5"), 12);

  // A stall past a 1 s timeout (on an idle machine; it follows the build):
  // the others give up naming the stalled rank instead of waiting for it as
  // the default 1800 s would. As
  // in Deadline.AStalledRankIsNamedAndNobodyWaitsForever, a waiting rank
  // gives up within 2 * timeout + 1 s of reaching the step; the stall is
  // longer by a margin for a slow start (4 ranks on 2 cores). Last: after a
  // timeout the save's communicator is unusable (see README, Deadlines).
  const double kTimeout = 1 * test::time_scale();
  const double kStall = 2 * kTimeout + 1 + 6;
  ::setenv("H5DCP_INJECT_FAULT", ("save:plan@" + std::to_string(stalled) + "~" + std::to_string(kStall)).c_str(), 1);
  auto options = test::staging_of(1 << 20);
  options.timeout_seconds = kTimeout;
  const auto started = std::chrono::steady_clock::now();
  try {
    async_save(training_state(rank, test::world_size(), 13), dir.file("t.h5"), options).get();
    ADD_FAILURE() << "expected a CheckpointError on rank " << rank;
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.step(), "save:plan") << e.what();
    if (rank != stalled) {
      EXPECT_EQ(e.failures().count(stalled), 1u) << e.what();
    }
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (rank != stalled) {
    EXPECT_LT(waited, kStall) << "rank " << rank;
  }
  ::unsetenv("H5DCP_INJECT_FAULT");
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"t.h5"});
  expect_checkpoint_holds(dir.file("t.h5"), 12);  // the older checkpoint is intact
}

TEST_F(AsyncSave, FinishingWithASaveInFlightCompletesIt) {
  test::TempDir dir;
  auto future = async_save(training_state(test::world_rank(), test::world_size(), 9), dir.file("late.h5"),
                           test::staging_of(4096));
  finish_async_saves();  // with the save in flight: it completes first
  EXPECT_EQ(future.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(future.get().metadata.world_size, test::world_size());
  EXPECT_EQ(last_async_save_stats().staging_bytes, 0);  // the staging memory is freed
  expect_checkpoint_holds(dir.file("late.h5"), 9);
}

TEST_F(AsyncSave, LoadsInterleaveWithSavesInFlight) {
  test::TempDir dir;
  auto f1 = async_save(training_state(test::world_rank(), test::world_size(), 10), dir.file("x.h5"));
  // A load right away waits for the save in flight (one thread in HDF5).
  f1.get();
  expect_checkpoint_holds(dir.file("x.h5"), 10);
  auto f2 = async_save(training_state(test::world_rank(), test::world_size(), 11), dir.file("y.h5"));
  expect_checkpoint_holds(dir.file("x.h5"), 10);  // while y.h5 may still be writing
  f2.get();
  expect_checkpoint_holds(dir.file("y.h5"), 11);
}

// Resolves blocks only once the caller says so (or after 60 s, failing the
// test): staging that waits for it cannot be running in the caller's thread.
class GatedPlanner : public DefaultSavePlanner {
 public:
  explicit GatedPlanner(std::shared_future<void> open) : open_(std::move(open)) {}
  at::Tensor resolve_tensor(const PlannedTensor& tensor, const PlannedChunk& chunk) override {
    if (open_.wait_for(std::chrono::seconds(60)) != std::future_status::ready)
      throw std::runtime_error("the gate was never opened");
    resolved_on_ = std::this_thread::get_id();
    policy_ = sched_getscheduler(0);
    return DefaultSavePlanner::resolve_tensor(tensor, chunk);
  }
  std::thread::id resolved_on() const { return resolved_on_; }
  int resolved_with_policy() const { return policy_; }

 private:
  std::shared_future<void> open_;
  std::thread::id resolved_on_;
  int policy_ = -1;
};

TEST_F(AsyncSave, StagingInTheBackgroundLetsTheCallerGoOnBeforeTheCopy) {
  test::TempDir dir;
  for (const std::int64_t staging : {4096, 1 << 20}) {  // streamed, and staged whole
    const auto path = dir.file("g" + std::to_string(staging) + ".h5");
    std::promise<void> gate;
    GatedPlanner planner(gate.get_future().share());
    auto options = test::staging_of(staging);
    options.planner = &planner;
    auto state = training_state(test::world_rank(), test::world_size(), 40);
    auto save = async_stage_and_save(state, path, options);
    // Returned while no block can have been copied: staging waits for the gate.
    EXPECT_EQ(save.staged.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
    EXPECT_EQ(save.saved.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
    EXPECT_TRUE(last_async_save_stats().background_staging);
    EXPECT_EQ(last_async_save_stats().staged_bytes, 0);  // said once the copy is done
    gate.set_value();
    save.staged.get();
    // The tensors are free again: changing them does not reach the file.
    for (auto& s : std::get<ShardedTensor>(state.at("w")).local_shards()) s.tensor.fill_(-1);
    std::get<at::Tensor>(state.at("b")).fill_(7);
    EXPECT_NE(planner.resolved_on(), std::this_thread::get_id());
    EXPECT_NE(planner.resolved_on(), std::thread::id());
    // The staging thread gives up wakeup preemption (SCHED_BATCH): waking
    // it must not take the caller's core as the call returns.
    EXPECT_EQ(planner.resolved_with_policy(), SCHED_BATCH);
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);  // the caller's thread is left as it was
    const auto stats = last_async_save_stats();
    EXPECT_TRUE(stats.background_staging);
    EXPECT_GT(stats.staged_bytes, 0);
    EXPECT_GT(stats.staging_seconds, 0.0);
    EXPECT_EQ(save.saved.get().metadata.world_size, test::world_size());
    expect_checkpoint_holds(path, 40);
    EXPECT_TRUE(verify_checkpoint(path).ok()) << path;
  }
}

// Records what the directory holds while the caller copies its blocks
// (async_save resolves them in the caller's thread), after a pause long
// enough for a background thread to have created the file.
class SlowCopyPlanner : public DefaultSavePlanner {
 public:
  explicit SlowCopyPlanner(const test::TempDir& dir) : dir_(dir) {}
  at::Tensor resolve_tensor(const PlannedTensor& tensor, const PlannedChunk& chunk) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto entries = dir_.entries();
    seen_.insert(seen_.end(), entries.begin(), entries.end());
    return DefaultSavePlanner::resolve_tensor(tensor, chunk);
  }
  const std::vector<std::string>& seen() const { return seen_; }

 private:
  const test::TempDir& dir_;
  std::vector<std::string> seen_;
};

// When the caller copies every block whole, nothing of the save runs beside
// the copy: the file (its temporary sibling) is created once every rank's
// copy is done, so the copy has the cores to itself while the caller is
// blocked. It is still written and published as before.
TEST_F(AsyncSave, TheFileIsCreatedOnlyOnceTheCallersCopyIsDone) {
  test::TempDir dir;
  SlowCopyPlanner planner(dir);
  auto options = test::staging_of(1 << 20);  // every rank's blocks whole
  options.planner = &planner;
  const auto path = dir.file("c.h5");
  auto future = async_save(training_state(test::world_rank(), test::world_size(), 42), path, options);
  EXPECT_EQ(planner.seen(), std::vector<std::string>{});
  future.get();
  expect_checkpoint_holds(path, 42);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"c.h5"});
}

// A Stateful whose state_dict() makes new tensors each time: only the save
// holds them once the caller's state dict is gone.
class FreshTensors : public Stateful {
 public:
  explicit FreshTensors(std::int64_t seed) : seed_(seed) {}
  StateDict state_dict() override { return StateDict{{"t", reference_tensor({40, 50}, at::kDouble, seed_)}}; }
  void load_state_dict(const StateDict&) override {}

 private:
  std::int64_t seed_;
};

TEST_F(AsyncSave, BackgroundStagingKeepsTheStateDictAlive) {
  test::TempDir dir;
  std::promise<void> gate;
  GatedPlanner planner(gate.get_future().share());
  auto options = test::staging_of(8192);
  options.planner = &planner;
  StagedSave save;
  {
    auto state = training_state(test::world_rank(), test::world_size(), 41);
    state.emplace("fresh", std::make_shared<FreshTensors>(41));
    save = async_stage_and_save(state, dir.file("k.h5"), options);
  }  // the caller's state dict, its Stateful and the tensors it made are gone here
  gate.set_value();
  save.staged.get();
  save.saved.get();
  expect_checkpoint_holds(dir.file("k.h5"), 41);
  const auto all = load_all(dir.file("k.h5"));
  EXPECT_TRUE(
      bitwise_equal(std::get<at::Tensor>(value_at(all, "fresh/t")), reference_tensor({40, 50}, at::kDouble, 41)));
}

TEST_F(AsyncSave, ABackgroundStagingFailureOnOneRankReachesEverySaveButNotStaged) {
  test::TempDir dir;
  async_save(training_state(test::world_rank(), test::world_size(), 42), dir.file("f.h5"), test::staging_of(4096))
      .get();
  const int bad = test::world_size() - 1;
  for (const std::int64_t bytes : {4096, 1 << 20}) {
    ::setenv("H5DCP_INJECT_FAULT", ("async:stage@" + std::to_string(bad)).c_str(), 1);
    auto save = async_stage_and_save(training_state(test::world_rank(), test::world_size(), 43), dir.file("f.h5"),
                                     test::staging_of(bytes));
    EXPECT_NO_THROW(save.staged.get());  // the tensors are free again; the failure is the save's
    try {
      save.saved.get();
      ADD_FAILURE() << "expected a CheckpointError on rank " << test::world_rank();
    } catch (const CheckpointError& e) {
      EXPECT_EQ(e.failures().count(bad), 1u) << e.what();
      EXPECT_NE(std::string(e.what()).find("injected fault at async:stage"), std::string::npos) << e.what();
    }
    ::unsetenv("H5DCP_INJECT_FAULT");
  }
  expect_checkpoint_holds(dir.file("f.h5"), 42);  // the older checkpoint is intact
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"f.h5"});
}

TEST_F(AsyncSave, TheManagerStagesInTheBackgroundToo) {
  test::TempDir dir;
  CheckpointManager manager(dir.path(), Retention{2, 0});
  for (std::int64_t step = 1; step <= 3; ++step) {
    auto state = training_state(test::world_rank(), test::world_size(), 50 + step);
    auto save = manager.async_stage_and_save(step, state, test::staging_of(4096));
    save.staged.get();
    for (auto& s : std::get<ShardedTensor>(state.at("w")).local_shards()) s.tensor.fill_(-1);
  }
  const auto last = manager.wait();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->metadata.world_size, test::world_size());
  for (std::int64_t step = 2; step <= 3; ++step) expect_checkpoint_holds(manager.path_for(step), 50 + step);
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{2, 3}));
}

}  // namespace
}  // namespace h5dcp
