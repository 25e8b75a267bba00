// A path visible to some ranks only (issue 15, item 5), for real: the last
// rank runs in a mount namespace of its own with an empty tmpfs over
// $H5DCP_HIDDEN_DIR (tests/mpi/hidden_path_test.sh starts the job), so the
// files the others write there are invisible to it, and the files it writes
// there are invisible to them. Collective loads used to hang there forever
// (a rank's local check threw before a collective open the others were in);
// every rank must now throw the same IoError naming the ranks that cannot
// see the file, well within the timeout.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::reference_tensor;

std::string hidden_dir() {
  const char* dir = std::getenv("H5DCP_HIDDEN_DIR");
  return dir == nullptr ? "" : dir;
}

class HiddenPath : public ::testing::Test {
 protected:
  void SetUp() override {
    if (hidden_dir().empty() || test::world_size() < 2) GTEST_SKIP() << "run by hidden_path_test.sh";
    blind_ = test::world_size() - 1;
    rank_ = test::world_rank();
  }

  // A checkpoint written into the hidden directory by `writer` alone: only
  // the ranks on its side of the mount see it.
  std::string write_on(int writer, const std::string& name) {
    const auto path = hidden_dir() + "/" + name;
    if (rank_ == writer) save(state_, path, {}, MPI_COMM_SELF);
    MPI_Barrier(MPI_COMM_WORLD);
    return path;
  }

  // `fn` must throw an IoError on every rank, quickly, saying `expected`.
  template <typename Fn>
  void expect_not_visible(Fn&& fn, const std::string& expected) {
    const auto started = std::chrono::steady_clock::now();
    try {
      fn();
      ADD_FAILURE() << "expected an IoError on rank " << rank_;
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    // The timeout is 30 s: the agreement must not need it.
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), 20.0);
  }

  StateDict state_{{"w", reference_tensor({12, 7}, at::kFloat)}, {"step", std::int64_t{2}}};
  int blind_ = 1;
  int rank_ = 0;
  LoadOptions load_options_ = [] {
    LoadOptions o;
    o.timeout_seconds = 30;
    return o;
  }();
};

TEST_F(HiddenPath, LoadOfAFileTheLastRankCannotSee) {
  const auto path = write_on(0, "seen_by_first.h5");
  StateDict into{{"w", at::zeros({12, 7})}, {"step", std::int64_t{0}}};
  expect_not_visible(
      [&] { load(into, path, load_options_); },
      "h5dcp: load: '" + path + "' is not visible on rank " + std::to_string(blind_) + ": use a shared file system");
  LoadAllOptions all;
  all.timeout_seconds = 30;
  expect_not_visible([&] { load_all(path, all); },
                     "h5dcp: load_all: '" + path + "' is not visible on rank " + std::to_string(blind_));
  expect_not_visible([&] { detect_file_kind(path, MPI_COMM_WORLD); },
                     "'" + path + "' is not visible on rank " + std::to_string(blind_));
}

TEST_F(HiddenPath, LoadOfAFileOnlyTheLastRankSees) {
  const auto path = write_on(blind_, "seen_by_last.h5");
  StateDict into{{"w", at::zeros({12, 7})}, {"step", std::int64_t{0}}};
  std::string others;
  for (int r = 0; r < blind_; ++r) others += (r ? ", " : "") + std::to_string(r);
  expect_not_visible([&] { load(into, path, load_options_); },
                     "'" + path + "' is not visible on rank" + (blind_ > 1 ? "s " : " ") + others);
}

TEST_F(HiddenPath, SaveIntoADirectoryTheLastRankCannotSee) {
  if (rank_ == 0) std::system(("mkdir -p '" + hidden_dir() + "/sub'").c_str());
  MPI_Barrier(MPI_COMM_WORLD);
  SaveOptions options;
  options.timeout_seconds = 30;
  const auto path = hidden_dir() + "/sub/new.h5";
  expect_not_visible([&] { save(state_, path, options); },
                     "h5dcp: save: '" + path + "' is not visible on rank " + std::to_string(blind_));
}

}  // namespace
}  // namespace h5dcp
