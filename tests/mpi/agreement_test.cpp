// Arguments that must agree across ranks (issue 15, item 6): the path and
// every option that drives a collective choice (the timeout, the I/O mode,
// the verify flags, the load layout) are agreed in the first collective
// step of save, load, load_all and async saves. A mismatch used to hang (a
// rank with a timeout waits for arrival messages a rank without one never
// sends) or run with ranks making different collective calls; now every
// rank throws the same UsageError naming the option, the rank that differs
// and its value. Needs 2+ ranks; the last rank is the odd one out.

#include <gtest/gtest.h>

#include <string>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::reference_tensor;

class Agreement : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::world_size() == 1) GTEST_SKIP() << "needs two ranks";
    odd_ = test::world_rank() == test::world_size() - 1;
    save(state_, path_);
  }

  // Runs `fn`, which must throw a UsageError on every rank whose message
  // holds `expected` (with "<odd>" replaced by the odd rank).
  template <typename Fn>
  void expect_disagreement(Fn&& fn, std::string expected) {
    const auto at = expected.find("<odd>");
    if (at != std::string::npos) expected.replace(at, 5, std::to_string(test::world_size() - 1));
    try {
      fn();
      ADD_FAILURE() << "expected a UsageError on rank " << test::world_rank();
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(expected), std::string::npos) << m;
      EXPECT_EQ(m.rfind("h5dcp: ", 0), 0u) << m;
    }
  }

  test::TempDir dir_;
  std::string path_ = dir_.file("base.h5");
  StateDict state_{{"w", reference_tensor({16, 5}, at::kFloat)}, {"step", std::int64_t{4}}};
  bool odd_ = false;
};

TEST_F(Agreement, SaveTimeouts) {
  SaveOptions options;
  options.timeout_seconds = odd_ ? -1 : 5;  // forever on one rank: it hung there
  expect_disagreement([&] { save(state_, dir_.file("t.h5"), options); },
                      "save: ranks passed different options: rank <odd> has timeout_seconds=none, rank 0 has 5");
  EXPECT_EQ(dir_.entries(), std::vector<std::string>{"base.h5"});
}

TEST_F(Agreement, SaveIoModes) {
  SaveOptions options;
  options.io_mode = odd_ ? IoMode::Independent : IoMode::Collective;
  expect_disagreement([&] { save(state_, dir_.file("m.h5"), options); },
                      "rank <odd> has io_mode=independent, rank 0 has collective");
}

TEST_F(Agreement, LoadTimeoutsAndVerifyFlags) {
  StateDict into{{"w", at::zeros({16, 5})}, {"step", std::int64_t{0}}};
  LoadOptions timeouts;
  timeouts.timeout_seconds = odd_ ? 7 : 30;
  expect_disagreement([&] { load(into, path_, timeouts); },
                      "load: ranks passed different options: rank <odd> has timeout_seconds=7, rank 0 has 30");
  LoadOptions verify;
  verify.verify_checksums = !odd_;
  expect_disagreement([&] { load(into, path_, verify); }, "rank <odd> has verify_checksums=false, rank 0 has true");
  LoadOptions strict;
  strict.strict = !odd_;
  expect_disagreement([&] { load(into, path_, strict); }, "rank <odd> has strict=false, rank 0 has true");
  LoadOptions convert;
  convert.convert_dtype = odd_;
  expect_disagreement([&] { load(into, path_, convert); }, "rank <odd> has convert_dtype=true, rank 0 has false");
  // Agreed options still load.
  load(into, path_);
  EXPECT_TRUE(test::bitwise_equal(std::get<at::Tensor>(into.at("w")), reference_tensor({16, 5}, at::kFloat)));
}

TEST_F(Agreement, LoadAllLayoutsAndVerifyFlags) {
  LoadAllOptions layout;
  layout.layout = odd_ ? LoadLayout::ShardedDim0 : LoadLayout::Whole;
  expect_disagreement([&] { load_all(path_, layout); }, "rank <odd> has layout=sharded_dim0, rank 0 has whole");
  LoadAllOptions verify;
  verify.verify_checksums = !odd_;
  expect_disagreement([&] { load_all(path_, verify); }, "rank <odd> has verify_checksums=false, rank 0 has true");
}

TEST_F(Agreement, Paths) {
  StateDict into{{"w", at::zeros({16, 5})}, {"step", std::int64_t{0}}};
  const auto other = dir_.file("other.h5");
  expect_disagreement(
      [&] { load(into, odd_ ? other : path_); },
      "load: ranks passed different checkpoint paths: rank <odd> has path='" + other + "', rank 0 has '" + path_ + "'");
}

TEST_F(Agreement, AsyncSaveOptions) {
  auto coordinator = test::staging_of(1 << 20);
  coordinator.coordinator = odd_ ? 1 : 0;  // refused on one rank only: the others went on and hung
  expect_disagreement([&] { async_save(state_, dir_.file("a.h5"), coordinator).get(); },
                      "ranks passed different coordinator ranks (from 0 to 1)");
  auto io = test::staging_of(1 << 20);
  io.io_mode = odd_ ? IoMode::Independent : IoMode::Collective;
  expect_disagreement([&] { async_save(state_, dir_.file("a.h5"), io).get(); },
                      "rank <odd> has io_mode=independent, rank 0 has collective");
  auto timeout = test::staging_of(1 << 20);
  timeout.timeout_seconds = odd_ ? -1 : 5;
  expect_disagreement([&] { async_save(state_, dir_.file("a.h5"), timeout).get(); },
                      "rank <odd> has timeout_seconds=none, rank 0 has 5");
  // Different staging sizes would make some ranks remake their staging
  // memory (a collective step) and not others.
  auto staging = test::staging_of(odd_ ? 1 << 21 : 1 << 20);
  expect_disagreement([&] { async_save(state_, dir_.file("a.h5"), staging).get(); },
                      "rank <odd> has staging_bytes=2097152, rank 0 has 1048576");
  // Async saves are still usable.
  async_save(state_, dir_.file("a.h5"), test::staging_of(1 << 20)).get();
  EXPECT_EQ(std::get<std::int64_t>(load_all(dir_.file("a.h5")).at("step")), 4);
  finish_async_saves();
}

}  // namespace
}  // namespace h5dcp
