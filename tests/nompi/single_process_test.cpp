// Single-process use without MPI_Init (the seeds' no_dist): save and load
// work, and failures are still CheckpointErrors naming rank 0.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

TEST(SingleProcess, MpiIsNotInitialized) {
  int initialized = 1;
  MPI_Initialized(&initialized);
  ASSERT_EQ(initialized, 0) << "this binary must run without MPI_Init";
}

TEST(SingleProcess, SaveAndLoadWithoutMpi) {
  test::TempDir dir;
  const auto full = test::reference_tensor({7, 6}, at::kBFloat16);
  StateDict sd{{"w", test::grid_shards(full, 2, 2, 0, 1)}, {"step", test::reference_tensor({}, at::kLong, 42)}};
  const auto md = save(sd, dir.file("solo.h5")).metadata;
  EXPECT_EQ(md.world_size, 1);
  StateDict into{{"w", at::zeros_like(full)}, {"step", at::zeros({}, at::kLong)}};
  load(into, dir.file("solo.h5"));
  EXPECT_TRUE(test::bitwise_equal(std::get<at::Tensor>(into.at("w")), full));
  EXPECT_TRUE(test::bitwise_equal(std::get<at::Tensor>(into.at("step")), std::get<at::Tensor>(sd.at("step"))));
  EXPECT_EQ(read_metadata(dir.file("solo.h5")).world_size, 1);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"solo.h5"});
}

TEST(SingleProcess, FailuresAreCheckpointErrorsOfRankZero) {
  test::TempDir dir;
  StateDict sd{{"v", at::ones({3})}};
  save(sd, dir.file("keep.h5"));
  ::setenv("H5DCP_INJECT_FAULT", "save:write@0", 1);
  try {
    save(StateDict{{"v", at::zeros({3})}}, dir.file("keep.h5"));
    ADD_FAILURE() << "expected a CheckpointError";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.step(), "save:write");
    EXPECT_EQ(e.failures().count(0), 1u);
  }
  ::unsetenv("H5DCP_INJECT_FAULT");
  StateDict into{{"v", at::zeros({3})}};
  load(into, dir.file("keep.h5"));
  EXPECT_TRUE(test::bitwise_equal(std::get<at::Tensor>(into.at("v")), at::ones({3})));
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"keep.h5"});
}

}  // namespace
}  // namespace h5dcp
