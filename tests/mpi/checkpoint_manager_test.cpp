// CheckpointManager at 1-4 ranks: retention, the atomic `latest` pointer,
// a stale or dangling pointer, orphaned partial files, a damaged newest
// checkpoint, async saves and their failures.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "h5dcp/checkpoint_manager.hpp"
#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

namespace fs = std::filesystem;
using test::bitwise_equal;

const std::vector<std::int64_t> kShape{10, 3};

// A state whose values depend on `step`: rows of a sharded tensor, a
// replicated one, and the step.
StateDict state_at(std::int64_t step) {
  const auto full = test::reference_tensor(kShape, at::kFloat, step);
  const auto layout = chunk_dim0(kShape, test::world_rank(), test::world_size());
  const auto rows = chunk_dim0_sizes(kShape, test::world_rank(), test::world_size())[0];
  return StateDict{
      {"w", ShardedTensor(kShape, {Shard{full.narrow(0, layout.offsets[0], rows).clone(), layout.offsets}})},
      {"b", test::reference_tensor({4}, at::kDouble, step)},
      {"step", step},
  };
}

StateDict zeros_like(const StateDict& state) {
  return StateDict{{"w", test::zeros_like(std::get<ShardedTensor>(state.at("w")))},
                   {"b", at::zeros({4}, at::kDouble)},
                   {"step", std::int64_t{-1}}};
}

bool same_state(const StateDict& a, const StateDict& b) {
  const auto& wa = std::get<ShardedTensor>(a.at("w")).local_shards();
  const auto& wb = std::get<ShardedTensor>(b.at("w")).local_shards();
  return wa.size() == 1 && wb.size() == 1 && bitwise_equal(wa[0].tensor, wb[0].tensor) &&
         bitwise_equal(std::get<at::Tensor>(a.at("b")), std::get<at::Tensor>(b.at("b"))) &&
         std::get<std::int64_t>(a.at("step")) == std::get<std::int64_t>(b.at("step"));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Rank 0 runs `fn` on the file system; everyone waits for it.
template <typename Fn>
void on_rank0(Fn fn) {
  if (test::world_rank() == 0) fn();
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(CheckpointManager, KeepsTheNewestAndEveryKth) {
  test::TempDir dir;
  CheckpointManager manager(dir.file("run"), Retention{3, 4});
  for (std::int64_t step = 1; step <= 10; ++step) manager.save(step, state_at(step));
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{4, 8, 9, 10}));
  EXPECT_EQ(read_text(dir.file("run/latest")), "step-00000010.h5\n");
  EXPECT_EQ(manager.path_for(10), dir.file("run/step-00000010.h5"));
  const auto latest = manager.latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 10);
  EXPECT_TRUE(manager.last_scan().pointer_current);
  EXPECT_TRUE(manager.last_scan().skipped.empty());

  auto loaded = zeros_like(state_at(10));
  const auto found = manager.load(loaded);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->path, manager.path_for(10));
  EXPECT_TRUE(same_state(loaded, state_at(10)));
}

TEST(CheckpointManager, NeverRemovesTheCheckpointJustSaved) {
  test::TempDir dir;
  CheckpointManager manager(dir.path(), Retention{2, 0});
  manager.save(10, state_at(10));
  manager.save(11, state_at(11));
  manager.save(5, state_at(5));  // an older step, e.g. after resuming from an older checkpoint
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{5, 10, 11}));
  EXPECT_EQ(read_text(dir.file("latest")), "step-00000005.h5\n");
  // The newest complete checkpoint wins over the pointer.
  EXPECT_EQ(manager.latest()->step, 11);
  EXPECT_FALSE(manager.last_scan().pointer_current);
  EXPECT_THROW(manager.save(-1, state_at(1)), UsageError);
}

TEST(CheckpointManager, KeepLastZeroKeepsEverything) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  for (std::int64_t step : {3, 1, 2}) manager.save(step, state_at(step));
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{1, 2, 3}));
}

TEST(CheckpointManager, AsyncSavesPublishThePointerWhenDone) {
  test::TempDir dir;
  CheckpointManager manager(dir.path(), Retention{1, 0});
  EXPECT_TRUE(manager.poll());  // nothing in flight
  auto state = state_at(2);
  auto first = manager.async_save(2, state);
  EXPECT_EQ(manager.in_flight(), std::optional<std::int64_t>(2));
  // Staged: changing the tensors now does not change the checkpoint.
  std::get<at::Tensor>(state["b"]).fill_(42.0);
  // The next save waits for the first and publishes it.
  auto second = manager.async_save(4, state_at(4));
  EXPECT_EQ(first.get().metadata.world_size, test::world_size());
  const auto result = manager.wait();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(second.get().bytes_per_rank, result->bytes_per_rank);
  EXPECT_TRUE(manager.poll());
  EXPECT_FALSE(manager.in_flight().has_value());
  EXPECT_FALSE(manager.wait().has_value());  // nothing more
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{4}));
  EXPECT_EQ(read_text(dir.file("latest")), "step-00000004.h5\n");

  auto loaded = zeros_like(state_at(4));
  EXPECT_EQ(manager.load(loaded)->step, 4);
  EXPECT_TRUE(same_state(loaded, state_at(4)));
}

TEST(CheckpointManager, StepTwoWasSavedBeforeItChanged) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  auto state = state_at(2);
  manager.async_save(2, state);
  std::get<at::Tensor>(state["b"]).fill_(42.0);
  manager.wait();
  auto loaded = zeros_like(state_at(2));
  manager.load(loaded);
  EXPECT_TRUE(same_state(loaded, state_at(2)));
}

TEST(CheckpointManager, FindsTheNewestCheckpointWhenThePointerIsStaleOrDangling) {
  test::TempDir dir;
  {
    CheckpointManager manager(dir.path());
    for (std::int64_t step = 1; step <= 3; ++step) manager.save(step, state_at(step));
  }
  // A crash between publishing step 3 and moving the pointer leaves it at 1.
  on_rank0([&] { std::ofstream(dir.file("latest")) << "step-00000001.h5\n"; });
  CheckpointManager manager(dir.path());
  auto latest = manager.latest();
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 3);
  EXPECT_EQ(manager.last_scan().pointer, std::optional<std::string>("step-00000001.h5"));
  EXPECT_FALSE(manager.last_scan().pointer_current);

  // A pointer to a file that is gone, and no pointer at all.
  on_rank0([&] { std::ofstream(dir.file("latest")) << "step-00000099.h5\n"; });
  EXPECT_EQ(manager.latest()->step, 3);
  on_rank0([&] { fs::remove(dir.file("latest")); });
  EXPECT_EQ(manager.latest()->step, 3);
  EXPECT_FALSE(manager.last_scan().pointer.has_value());

  // The newest checkpoint removed by hand: the one before it.
  on_rank0([&] { fs::remove(manager.path_for(3)); });
  EXPECT_EQ(manager.latest()->step, 2);
}

TEST(CheckpointManager, SkipsADamagedNewestCheckpointWithAWarning) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  manager.save(1, state_at(1));
  manager.save(2, state_at(2));
  on_rank0([&] {
    std::ofstream(manager.path_for(3)) << "not an HDF5 file";  // garbage
    fs::copy_file(manager.path_for(2), manager.path_for(4));   // truncated
    fs::resize_file(manager.path_for(4), fs::file_size(manager.path_for(2)) / 2);
  });
  auto loaded = zeros_like(state_at(2));
  const auto found = manager.load(loaded);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->step, 2);
  EXPECT_TRUE(same_state(loaded, state_at(2)));
  const auto& skipped = manager.last_scan().skipped;
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_EQ(skipped[0].step, 4);
  EXPECT_EQ(skipped[1].step, 3);
  EXPECT_EQ(skipped[1].path, manager.path_for(3));
  EXPECT_FALSE(skipped[0].reason.empty());
  EXPECT_FALSE(skipped[1].reason.empty());
  EXPECT_TRUE(manager.last_scan().pointer_current);  // `latest` names step 2: right, the newer files are damaged

  // Saving step 3 again replaces the damaged file.
  manager.save(3, state_at(3));
  EXPECT_EQ(manager.latest()->step, 3);
}

TEST(CheckpointManager, RemovesOrphanedPartialFilesAtStart) {
  test::TempDir dir;
  {
    CheckpointManager manager(dir.path());
    manager.save(1, state_at(1));
  }
  on_rank0([&] {
    for (const char* name : {".step-00000002.h5.h5dcp-partial.0123456789abcdef", ".latest.tmp.4242", "notes.txt",
                             ".hidden", "step-2.h5"})
      std::ofstream(dir.file(name)) << "x";
  });
  CheckpointManager manager(dir.path());
  EXPECT_EQ(manager.removed_orphans(),
            (std::vector<std::string>{dir.file(".latest.tmp.4242"),
                                      dir.file(".step-00000002.h5.h5dcp-partial.0123456789abcdef")}));
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{".hidden", "latest", "notes.txt", "step-00000001.h5", "step-2.h5"}));
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{1}));  // "step-2.h5" is not one of its names
  EXPECT_EQ(manager.latest()->step, 1);
}

TEST(CheckpointManager, AnEmptyDirectoryHasNoCheckpoint) {
  test::TempDir dir;
  CheckpointManager manager(dir.file("new/run/"));
  EXPECT_TRUE(fs::is_directory(dir.file("new/run")));
  EXPECT_EQ(manager.directory(), dir.file("new/run"));
  EXPECT_FALSE(manager.latest().has_value());
  auto state = zeros_like(state_at(1));
  EXPECT_FALSE(manager.load(state).has_value());
  EXPECT_EQ(std::get<std::int64_t>(state["step"]), -1);  // untouched
  EXPECT_TRUE(manager.steps().empty());
}

TEST(CheckpointManager, AFailedAsyncSaveIsThrownByWaitOnEveryRankAndPublishesNothing) {
  test::TempDir dir;
  CheckpointManager manager(dir.path());
  manager.save(1, state_at(1));
  const std::string fault = "save:write@" + std::to_string(test::world_size() - 1);
  ::setenv("H5DCP_INJECT_FAULT", fault.c_str(), 1);
  auto future = manager.async_save(2, state_at(2));
  future.wait();
  ::unsetenv("H5DCP_INJECT_FAULT");
  EXPECT_TRUE(manager.poll());
  try {
    manager.wait();
    ADD_FAILURE() << "wait() did not throw";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.step(), "save:write");
    EXPECT_EQ(e.failures().count(test::world_size() - 1), 1u);
  }
  EXPECT_EQ(manager.steps(), (std::vector<std::int64_t>{1}));
  EXPECT_EQ(read_text(dir.file("latest")), "step-00000001.h5\n");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"latest", "step-00000001.h5"}));  // no partial file left
  // The manager goes on.
  manager.async_save(3, state_at(3));
  manager.wait();
  EXPECT_EQ(manager.latest()->step, 3);
}

TEST(CheckpointManager, RanksMustAgreeOnTheDirectory) {
  test::TempDir dir;
  if (test::world_size() > 1) {
    EXPECT_THROW(CheckpointManager(dir.file("rank" + std::to_string(test::world_rank() % 2))), UsageError);
  }
  EXPECT_THROW(CheckpointManager(dir.path(), Retention{-1, 0}), UsageError);
}

}  // namespace
}  // namespace h5dcp
