// Failures are collective: a rank that throws while planning or writing, or
// a bad load, gives every rank the same CheckpointError naming the step and
// the rank; nothing hangs, nothing partial is published, and an older
// checkpoint at the same path still loads.

#include <gtest/gtest.h>

#include <sys/mount.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::bitwise_equal;
using test::reference_tensor;

// Sets H5DCP_INJECT_FAULT for the scope of one call.
class InjectFault {
 public:
  explicit InjectFault(const std::string& spec) { ::setenv("H5DCP_INJECT_FAULT", spec.c_str(), 1); }
  ~InjectFault() { ::unsetenv("H5DCP_INJECT_FAULT"); }
};

using test::expect_checkpoint_error;

class Failures : public ::testing::Test {
 protected:
  // An older checkpoint at `path` with known contents.
  void SetUp() override {
    path_ = dir_.file("ckpt.h5");
    old_ = reference_tensor({12, 4}, at::kFloat, 3);
    StateDict sd{{"w", test::grid_shards(old_, 2, 2, test::world_rank(), test::world_size())}};
    save(sd, path_);
  }

  // The newer state that the failing saves try to write.
  StateDict newer() const {
    return StateDict{{"w", test::grid_shards(reference_tensor({12, 4}, at::kFloat, 99), 2, 2, test::world_rank(),
                                             test::world_size())},
                     {"extra", reference_tensor({5}, at::kInt)}};
  }

  void expect_old_checkpoint_intact() {
    StateDict into{{"w", at::zeros({12, 4}, at::kFloat)}};
    load(into, path_);
    EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(into.at("w")), old_)) << "the older checkpoint changed";
    EXPECT_EQ(read_metadata(path_).state_dict_metadata.count("extra"), 0u);
    EXPECT_EQ(dir_.entries(), std::vector<std::string>{"ckpt.h5"}) << "a temporary file was left behind";
  }

  test::TempDir dir_;
  std::string path_;
  at::Tensor old_;
};

TEST_F(Failures, ARankThatThrowsWhilePlanning) {
  const int bad = test::world_size() - 1;
  auto sd = newer();
  if (test::world_rank() == bad) {
    // A shard that sticks out of its global shape: this rank's planning throws.
    std::get<ShardedTensor>(sd.at("w")).local_shards().push_back(Shard{at::zeros({3, 4}), {11, 0}});
  }
  const auto e = expect_checkpoint_error([&] { save(sd, path_); });
  EXPECT_EQ(e.step(), "save:plan");
  ASSERT_EQ(e.failures().count(bad), 1u) << e.what();
  EXPECT_EQ(e.failures().size(), 1u) << e.what();
  EXPECT_NE(e.failures().at(bad).find("'w'"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("[rank " + std::to_string(bad) + "]"), std::string::npos) << e.what();
  expect_old_checkpoint_intact();
}

TEST_F(Failures, ARankThatThrowsWhileWriting) {
  const int bad = test::world_size() - 1;
  for (const auto mode : {IoMode::Collective, IoMode::Independent}) {
    auto sd = newer();
    InjectFault fault("save:write@" + std::to_string(bad));
    const auto e = expect_checkpoint_error([&] { save(sd, path_, SaveOptions{{0}, mode}); });
    EXPECT_EQ(e.step(), "save:write");
    ASSERT_EQ(e.failures().size(), 1u) << e.what();
    EXPECT_NE(e.failures().at(bad).find("injected fault at save:write on rank " + std::to_string(bad)),
              std::string::npos)
        << e.what();
  }
  expect_old_checkpoint_intact();
}

TEST_F(Failures, FailuresWhileSyncingOrPublishing) {
  for (const std::string point : {"save:sync", "save:commit"}) {
    auto sd = newer();
    InjectFault fault(point + "@0");
    const auto e = expect_checkpoint_error([&] { save(sd, path_); });
    EXPECT_EQ(e.step(), point);
    EXPECT_EQ(e.failures().count(0), 1u) << e.what();
  }
  expect_old_checkpoint_intact();
}

TEST_F(Failures, SeveralFailingRanksAreAllNamed) {
  std::string spec;
  for (int r = 0; r < test::world_size(); ++r) spec += (r ? "," : "") + std::string("save:plan@") + std::to_string(r);
  InjectFault fault(spec);
  auto sd = newer();
  const auto e = expect_checkpoint_error([&] { save(sd, path_); });
  EXPECT_EQ(e.failures().size(), static_cast<std::size_t>(test::world_size()));
  expect_old_checkpoint_intact();
}

TEST_F(Failures, RanksDisagreeingOnAShape) {
  if (test::world_size() == 1) GTEST_SKIP() << "one rank cannot disagree with itself";
  auto sd = newer();
  sd["mismatch"] = at::zeros({test::world_rank() == 0 ? 3 : 4});
  const auto e = expect_checkpoint_error([&] { save(sd, path_); });
  EXPECT_EQ(e.step(), "save:plan");
  EXPECT_NE(std::string(e.what()).find("ranks disagree on 'mismatch'"), std::string::npos) << e.what();
  expect_old_checkpoint_intact();
}

TEST_F(Failures, UnsupportedDtypeIsNamed) {
  auto sd = newer();
  // Two 4-bit floats per byte (MX formats): not a dtype h5dcp stores.
  sd["packed"] = at::zeros({2}, at::kByte).view(at::kFloat4_e2m1fn_x2);
  const auto e = expect_checkpoint_error([&] { save(sd, path_); });
  EXPECT_NE(std::string(e.what()).find("'packed' has dtype Float4_e2m1fn_x2"), std::string::npos) << e.what();
  expect_old_checkpoint_intact();
}

TEST_F(Failures, LoadNamesMissingKeysAndMismatches) {
  StateDict into{{"w", at::zeros({12, 5}, at::kFloat)}, {"absent", at::zeros({1})}, {"w_as_double", at::zeros({1})}};
  const auto e = expect_checkpoint_error([&] { load(into, path_); });
  EXPECT_EQ(e.step(), "load:plan");
  EXPECT_EQ(e.failures().size(), static_cast<std::size_t>(test::world_size()));
  const std::string m = e.what();
  EXPECT_NE(m.find("missing from the checkpoint: 'absent', 'w_as_double'"), std::string::npos) << m;
  EXPECT_NE(m.find("'w' has global shape [12, 4] in the checkpoint but [12, 5]"), std::string::npos) << m;

  StateDict wrong_dtype{{"w", at::zeros({12, 4}, at::kDouble)}};
  const auto d = expect_checkpoint_error([&] { load(wrong_dtype, path_); });
  EXPECT_NE(std::string(d.what()).find("'w' is float32 in the checkpoint but float64"), std::string::npos) << d.what();
}

TEST_F(Failures, LoadOfAMissingOrForeignFile) {
  StateDict into{{"w", at::zeros({12, 4})}};
  auto e = expect_checkpoint_error([&] { load(into, dir_.file("nope.h5")); });
  EXPECT_EQ(e.step(), "load:metadata");
  EXPECT_NE(std::string(e.what()).find("no checkpoint at"), std::string::npos) << e.what();

  if (test::world_rank() == 0) {
    FILE* f = std::fopen(dir_.file("text.h5").c_str(), "w");
    std::fputs("not hdf5", f);
    std::fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  e = expect_checkpoint_error([&] { load(into, dir_.file("text.h5")); });
  EXPECT_NE(std::string(e.what()).find("is not an HDF5 file"), std::string::npos) << e.what();
  if (test::world_rank() == 0) std::remove(dir_.file("text.h5").c_str());
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST_F(Failures, ARankThatThrowsWhileReading) {
  const int bad = test::world_size() - 1;
  StateDict into{{"w", at::zeros({12, 4})}};
  InjectFault fault("load:read@" + std::to_string(bad));
  const auto e = expect_checkpoint_error([&] { load(into, path_); });
  EXPECT_EQ(e.step(), "load:read");
  EXPECT_EQ(e.failures().count(bad), 1u);
}

TEST_F(Failures, SaveIntoAMissingDirectory) {
  auto sd = newer();
  const auto e = expect_checkpoint_error([&] { save(sd, dir_.file("no/such/dir/ckpt.h5")); });
  EXPECT_EQ(e.step(), "save:plan");
  EXPECT_NE(std::string(e.what()).find("no/such/dir"), std::string::npos) << e.what();
  expect_old_checkpoint_intact();
}

}  // namespace
}  // namespace h5dcp

namespace h5dcp {
namespace {

TEST(Arguments, RanksPassingDifferentPathsOrCoordinatorsAllFail) {
  if (test::world_size() == 1) GTEST_SKIP() << "needs two ranks";
  test::TempDir dir;
  StateDict sd{{"v", at::ones({2})}};
  const int rank = test::world_rank();
  try {
    save(sd, dir.file(rank == 0 ? "a.h5" : "b.h5"));
    ADD_FAILURE() << "expected a UsageError on rank " << rank;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("different checkpoint paths"), std::string::npos) << e.what();
  }
  try {
    save(sd, dir.file("c.h5"), SaveOptions{rank == 0 ? 0 : 1});
    ADD_FAILURE() << "expected a UsageError on rank " << rank;
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("different coordinator ranks (from 0 to 1)"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(dir.entries().empty());
}

}  // namespace
}  // namespace h5dcp

namespace h5dcp {
namespace {

TEST(Deadline, AStalledRankIsNamedAndNobodyWaitsForever) {
  if (test::world_size() == 1) GTEST_SKIP() << "needs two ranks";
  test::TempDir dir;
  const int rank = test::world_rank();
  const int stalled = test::world_size() - 1;
  StateDict sd{{"w", test::grid_shards(reference_tensor({8, 4}, at::kFloat), 2, 1, rank, test::world_size())}};
  save(sd, dir.file("ok.h5"));

  // Bounds derived from the configured deadline, not from how fast a loaded
  // machine is: a waiting rank gives up within 2 * timeout + 1 s of reaching
  // the step (the coordinator may wait a full timeout first); the stall
  // lasts that plus kSlack, so "gave up before the stalled rank arrived"
  // tells a deadline from a wait for the stalled rank, with kSlack seconds
  // of room for a slow start of the save (4 ranks on 2 cores under ASan).
  // The deadline, 1 s on an idle machine, follows the build.
  const double kTimeout = 1 * test::time_scale();
  const double kSlack = 6;
  const double kGiveUp = 2 * kTimeout + 1;
  const double kStall = kGiveUp + kSlack;
  std::ostringstream within;  // as the error prints it
  within << "did not reach step 'save:plan' within " << kTimeout << " s";
  ::setenv("H5DCP_INJECT_FAULT", ("save:plan@" + std::to_string(stalled) + "~" + std::to_string(kStall)).c_str(), 1);
  SaveOptions options;
  options.timeout_seconds = kTimeout;
  const auto started = std::chrono::steady_clock::now();
  try {
    save(sd, dir.file("ok.h5"), options);
    ADD_FAILURE() << "expected a CheckpointError on rank " << rank;
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.step(), "save:plan") << e.what();
    if (rank == stalled) {
      // It arrived late: nobody answered it.
      EXPECT_EQ(e.failures().count(0), 1u) << e.what();
      EXPECT_NE(std::string(e.what()).find("the coordinator did not answer"), std::string::npos) << e.what();
    } else {
      EXPECT_EQ(e.failures().count(stalled), 1u) << e.what();
      EXPECT_NE(std::string(e.what()).find(within.str()), std::string::npos) << e.what();
    }
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (rank == stalled) {
    // It slept kStall s, then gave up within kGiveUp s of arriving.
    EXPECT_GE(waited, kStall) << "rank " << rank;
    EXPECT_LT(waited, kStall + kGiveUp + kSlack) << "rank " << rank;
  } else {
    // The deadline ended the wait, not the stalled rank's arrival.
    EXPECT_LT(waited, kStall) << "rank " << rank;
  }
  ::unsetenv("H5DCP_INJECT_FAULT");
  MPI_Barrier(MPI_COMM_WORLD);

  // Nothing was published, the older checkpoint is intact, and h5dcp works on.
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ok.h5"});
  StateDict back{{"w", at::zeros({8, 4})}};
  load(back, dir.file("ok.h5"));
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(back.at("w")), reference_tensor({8, 4}, at::kFloat)));
}

}  // namespace
}  // namespace h5dcp

namespace h5dcp {
namespace {

// A full disk: a 1 MiB tmpfs mounted inside the test directory (as root,
// which CI is; RLIMIT_FSIZE is no substitute: ROMIO aborts the job on EFBIG).
class SmallFileSystem {
 public:
  explicit SmallFileSystem(const std::string& dir) : dir_(dir) {
    int ok = 0;
    if (test::world_rank() == 0) {
      std::filesystem::create_directories(dir_);
      ok = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "size=1m") == 0 ? 1 : 0;
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    mounted_ = ok == 1;
  }
  ~SmallFileSystem() {
    MPI_Barrier(MPI_COMM_WORLD);
    if (mounted_ && test::world_rank() == 0) ::umount(dir_.c_str());
    MPI_Barrier(MPI_COMM_WORLD);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

TEST(FullDisk, IsAClearErrorAndLosesNothing) {
  test::TempDir dir;
  SmallFileSystem fs(dir.file("small"));
  ASSERT_TRUE(fs.mounted()) << "mounting a tmpfs needs root (CI runs as root)";
  const auto path = dir.file("small/ckpt.h5");
  const int rank = test::world_rank();
  const int size = test::world_size();
  const auto old = reference_tensor({64, 64}, at::kFloat);  // 16 KiB: fits
  save(StateDict{{"w", test::grid_shards(old, size, 1, rank, size)}}, path);
  for (const auto mode : {IoMode::Collective, IoMode::Independent}) {
    // 4 MiB: does not fit in 1 MiB.
    StateDict big{{"w", test::grid_shards(reference_tensor({64, 64}, at::kFloat, 1), size, 1, rank, size)},
                  {"big", test::grid_shards(reference_tensor({1024, 1024}, at::kFloat), size, 1, rank, size)}};
    try {
      save(big, path, SaveOptions{{0}, mode});
      ADD_FAILURE() << "expected a CheckpointError on rank " << rank;
    } catch (const CheckpointError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("No space left on device"), std::string::npos) << m;
    }
  }
  StateDict back{{"w", at::zeros({64, 64})}};
  load(back, path);
  EXPECT_TRUE(bitwise_equal(std::get<at::Tensor>(back.at("w")), old));
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("small"))) left.push_back(e.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"ckpt.h5"});
}

}  // namespace
}  // namespace h5dcp
