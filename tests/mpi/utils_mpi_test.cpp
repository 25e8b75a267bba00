// The collective utilities at 1-4 ranks: broadcasting a module's states in
// buckets from every rank in turn, checking parameter shapes across ranks
// (the same error everywhere), and the node-local rank / device mapping.

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <set>
#include <string>

#include "h5dcp/error.hpp"
#include "h5dcp/training/device.hpp"
#include "h5dcp/training/module_sync.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

using test::world_rank;
using test::world_size;

// Rank-specific values of one state: a formula of (rank, seed), exact in
// every dtype used here.
at::Tensor value(int rank, int seed, at::IntArrayRef shape, at::ScalarType dtype) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  auto v = at::arange(n, at::kLong) + rank * 100 + seed * 10;
  if (dtype == at::kBool) return ((v + rank) % 2 == 0).reshape(shape);
  return v.to(dtype).reshape(shape);
}

// Parameters and buffers of several dtypes, one of them non-contiguous, in
// a submodule too; every value depends on `rank`.
std::shared_ptr<torch::nn::Module> make_model(int rank) {
  auto root = std::make_shared<torch::nn::Module>();
  auto sub = std::make_shared<torch::nn::Module>();
  root->register_parameter("w", value(rank, 1, {5, 3}, at::kFloat));
  root->register_parameter("b", value(rank, 2, {7}, at::kDouble));
  root->register_parameter("t", value(rank, 3, {4, 3}, at::kFloat).t());  // non-contiguous
  root->register_buffer("count", value(rank, 4, {3}, at::kLong));
  sub->register_parameter("k", value(rank, 5, {2, 2, 2}, at::kBFloat16));
  sub->register_parameter("skip", value(rank, 6, {2}, at::kFloat));
  sub->register_buffer("mask", value(rank, 7, {6}, at::kBool));
  root->register_module("sub", sub);
  return root;
}

at::Tensor state(const torch::nn::Module& m, const std::string& name) {
  for (const auto& p : m.named_parameters())
    if (p.key() == name) return p.value();
  for (const auto& b : m.named_buffers())
    if (b.key() == name) return b.value();
  ADD_FAILURE() << "no state " << name;
  return {};
}

// The bucket rules, for the tensors of `sizes` bytes.
void expect_buckets_within(const std::vector<BroadcastBucket>& buckets, const std::vector<std::size_t>& sizes,
                           std::size_t limit) {
  std::vector<int> seen(sizes.size(), 0);
  for (const auto& b : buckets) {
    std::size_t bytes = 0;
    for (auto i : b.tensors) {
      ++seen.at(i);
      bytes += sizes[i];
    }
    EXPECT_EQ(bytes, b.bytes);
    if (b.tensors.size() > 1) {
      EXPECT_LE(b.bytes, limit);
    }
  }
  for (auto n : seen) EXPECT_EQ(n, 1);
}

TEST(SyncModuleStates, EveryRankEndsWithTheSourcesValues) {
  const std::vector<std::string> names{"w", "b", "t", "sub.k", "count", "sub.mask"};  // parameters, then buffers
  for (int src = 0; src < world_size(); ++src) {
    auto model = make_model(world_rank());
    const auto reference = make_model(src);
    SyncModuleOptions options;
    options.src = src;
    options.bucket_bytes = 40;
    options.ignore = {"sub.skip"};
    const auto result = sync_module_states(*model, options);
    EXPECT_EQ(result.names, names);
    for (const auto& name : names)
      EXPECT_TRUE(test::bitwise_equal(state(*model, name), state(*reference, name))) << name << " from " << src;
    // The ignored parameter keeps this rank's value.
    EXPECT_TRUE(test::bitwise_equal(state(*model, "sub.skip"), value(world_rank(), 6, {2}, at::kFloat)));
    // Parameters are still leaves that require grad.
    EXPECT_TRUE(state(*model, "w").requires_grad());
    EXPECT_TRUE(state(*model, "w").is_leaf());
    std::vector<std::size_t> sizes;
    for (const auto& name : names) sizes.push_back(state(*model, name).nbytes());
    expect_buckets_within(result.buckets, sizes, 40);
  }
}

TEST(SyncModuleStates, BuffersStayWhenNotBroadcast) {
  auto model = make_model(world_rank());
  SyncModuleOptions options;
  options.src = world_size() - 1;
  options.broadcast_buffers = false;
  const auto result = sync_module_states(*model, options);
  EXPECT_EQ(result.names, (std::vector<std::string>{"w", "b", "t", "sub.k", "sub.skip"}));
  EXPECT_TRUE(test::bitwise_equal(state(*model, "w"), value(world_size() - 1, 1, {5, 3}, at::kFloat)));
  EXPECT_TRUE(test::bitwise_equal(state(*model, "count"), value(world_rank(), 4, {3}, at::kLong)));
  EXPECT_TRUE(test::bitwise_equal(state(*model, "sub.mask"), value(world_rank(), 7, {6}, at::kBool)));
  // With the default 250 MiB buckets: one per dtype (float32, float64, bfloat16).
  EXPECT_EQ(result.buckets.size(), 3u);
}

TEST(SyncParamsAndBuffers, BucketSizesAreRespectedDownToZero) {
  const int src = world_size() - 1;
  const auto make = [](int rank) {
    return std::vector<at::Tensor>{value(rank, 1, {4}, at::kFloat),  value(rank, 2, {4}, at::kFloat),
                                   value(rank, 3, {2}, at::kDouble), value(rank, 4, {8}, at::kFloat),
                                   value(rank, 5, {0}, at::kFloat),  value(rank, 6, {3, 5}, at::kHalf),
                                   value(rank, 7, {1000}, at::kInt)};
  };
  for (std::size_t limit :
       {std::size_t{0}, std::size_t{1}, std::size_t{16}, std::size_t{32}, std::size_t{100}, std::size_t{1} << 20}) {
    auto mine = make(world_rank());
    const auto expected = make(src);
    const auto buckets = sync_params_and_buffers(mine, limit, src);
    for (std::size_t i = 0; i < mine.size(); ++i)
      EXPECT_TRUE(test::bitwise_equal(mine[i], expected[i])) << "tensor " << i << " limit " << limit;
    std::vector<std::size_t> sizes;
    for (const auto& t : mine) sizes.push_back(t.nbytes());
    expect_buckets_within(buckets, sizes, limit);
    EXPECT_EQ(plan_broadcast_buckets(mine, limit).size(), buckets.size());
  }
  // The layout itself, exactly: 16 + 16 bytes of float32 fill a 32-byte bucket.
  auto mine = make(world_rank());
  const auto buckets = sync_params_and_buffers(mine, 32, src);
  std::vector<std::vector<std::size_t>> layout;
  for (const auto& b : buckets) layout.push_back(b.tensors);
  EXPECT_EQ(layout, (std::vector<std::vector<std::size_t>>{{0, 1}, {2}, {3, 4}, {5}, {6}}));
  EXPECT_EQ(buckets[0].dtype, at::kFloat);
  EXPECT_EQ(buckets[2].bytes, 32u);
  EXPECT_EQ(buckets[4].bytes, 4000u);  // larger than the limit: alone
}

// Every rank but `excluded`, as messages write them: runs of three or more
// as ranges ("ranks 0-2"), shorter ones listed ("ranks 0, 2, 3").
std::string ranks_except(int excluded) {
  std::vector<std::string> parts;
  const auto run = [&](int lo, int hi) {  // [lo, hi]
    if (hi < lo) return;
    if (hi - lo >= 2) {
      parts.push_back(std::to_string(lo) + "-" + std::to_string(hi));
    } else {
      for (int r = lo; r <= hi; ++r) parts.push_back(std::to_string(r));
    }
  };
  run(0, excluded - 1);
  run(excluded + 1, world_size() - 1);
  std::string text = world_size() == 2 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < parts.size(); ++i) text += (i ? ", " : "") + parts[i];
  return text;
}

// True when every rank passed the same text.
bool same_everywhere(const std::string& text) {
  const auto hash = static_cast<unsigned long long>(std::hash<std::string>{}(text));
  unsigned long long bounds[2] = {hash, ~hash};
  MPI_Allreduce(MPI_IN_PLACE, bounds, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return bounds[0] == ~bounds[1];
}

TEST(VerifyParamShapes, AgreeingRanksPass) {
  EXPECT_NO_THROW(verify_param_shapes_across_ranks(*make_model(world_rank())));
}

TEST(VerifyParamShapes, EveryRankGetsTheErrorNamingTheParameterAndTheRanks) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks to disagree";
  NamedTensors params{{"fc.weight", at::zeros({4, world_rank() == 1 ? 2 : 3})}, {"fc.bias", at::zeros({4})}};
  if (world_rank() == world_size() - 1) params.emplace_back("extra", at::zeros({2}));
  const auto last = world_size() - 1;
  std::string expected =
      "h5dcp: the parameters differ across ranks (every rank must hold the same names, shapes and dtypes, in the same "
      "order):\n  'fc.weight': shape [4, 3] float32 on " +
      ranks_except(1) + "; shape [4, 2] float32 on rank 1";
  expected += "\n  'extra': missing on " + ranks_except(last) + "; shape [2] float32 on rank " + std::to_string(last);
  std::string got;
  try {
    verify_param_shapes_across_ranks(params);
  } catch (const UsageError& e) {
    got = e.what();
  }
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(same_everywhere(got));
}

TEST(VerifyParamShapes, ALocalFailureIsReportedByEveryRank) {
  const int bad = world_size() - 1;
  NamedTensors params{{"w", world_rank() == bad ? at::Tensor() : at::zeros({2})}};
  try {
    verify_param_shapes_across_ranks(params);
    FAIL() << "an undefined tensor was accepted";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(e.step(), "verify_param_shapes");
    ASSERT_EQ(e.failures().size(), 1u);
    EXPECT_EQ(e.failures().begin()->first, bad);
    EXPECT_EQ(e.failures().begin()->second, "h5dcp: the tensor 'w' is undefined");
  }
}

TEST(SyncModuleStates, DisagreeingRanksChangeNothing) {
  if (world_size() < 2) GTEST_SKIP() << "needs two ranks to disagree";
  auto model = make_model(world_rank());
  if (world_rank() == 1) model->register_buffer("odd", at::zeros({1}));
  std::string got;
  try {
    sync_module_states(*model);
  } catch (const UsageError& e) {
    got = e.what();
  }
  EXPECT_NE(got.find("h5dcp: the module states differ across ranks"), std::string::npos) << got;
  EXPECT_NE(got.find("'odd': missing on " + ranks_except(1) + "; shape [1] float32 on rank 1"), std::string::npos)
      << got;
  EXPECT_TRUE(same_everywhere(got));
  EXPECT_TRUE(test::bitwise_equal(state(*model, "w"), value(world_rank(), 1, {5, 3}, at::kFloat)));
}

TEST(SyncModuleStates, RefusesABadSourceOnEveryRank) {
  auto model = make_model(world_rank());
  SyncModuleOptions options;
  options.src = world_size();
  EXPECT_THROW(sync_module_states(*model, options), UsageError);
  if (world_size() > 1) {
    options.src = world_rank() == 0 ? 0 : 1;  // ranks disagree on the source
    EXPECT_THROW(sync_module_states(*model, options), UsageError);
    options.src = 0;
    options.bucket_bytes = world_rank() == 0 ? 64 : 128;  // ... or on the bucket size
    EXPECT_THROW(sync_module_states(*model, options), UsageError);
  }
  EXPECT_TRUE(test::bitwise_equal(state(*model, "b"), value(world_rank(), 2, {7}, at::kDouble)));
}

TEST(NodeLocalRank, RanksOfThisNodeAreNumberedFromZero) {
  const auto local = node_local_rank();
  // All ranks run on this one machine: local ranks are the world ranks.
  EXPECT_EQ(local.size, world_size());
  EXPECT_EQ(local.rank, world_rank());
  EXPECT_FALSE(local.node.empty());
  std::vector<int> all(static_cast<std::size_t>(world_size()));
  MPI_Allgather(&local.rank, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  EXPECT_EQ(std::set<int>(all.begin(), all.end()).size(), all.size());
  EXPECT_EQ(*std::min_element(all.begin(), all.end()), 0);
  EXPECT_EQ(*std::max_element(all.begin(), all.end()), world_size() - 1);
  EXPECT_TRUE(same_everywhere(local.node));
}

TEST(AssignDevice, RankZeroGetsEveryRanksLine) {
  const auto assignment = assign_device();
  EXPECT_EQ(assignment.rank, world_rank());
  EXPECT_EQ(assignment.size, world_size());
  EXPECT_EQ(assignment.choice.local_rank, world_rank());
  EXPECT_EQ(assignment.choice.local_size, world_size());
  EXPECT_EQ(assignment.choice.local_rank_source, "MPI");
  const auto lines = gather_device_descriptions(assignment);
  if (world_rank() != 0) {
    EXPECT_TRUE(lines.empty());
    return;
  }
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(world_size()));
  for (int r = 0; r < world_size(); ++r) {
    const auto head = "rank " + std::to_string(r) + " (node " + assignment.node + ", local " + std::to_string(r) +
                      " of " + std::to_string(world_size()) + ") -> ";
    EXPECT_EQ(lines[static_cast<std::size_t>(r)].rfind(head, 0), 0u) << lines[static_cast<std::size_t>(r)];
    if (assignment.device_count == 0) {
      EXPECT_EQ(lines[static_cast<std::size_t>(r)].substr(head.size(), 4), "cpu ");
    }
  }
}

}  // namespace
}  // namespace h5dcp
