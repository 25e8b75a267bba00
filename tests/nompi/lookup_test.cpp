// The seeds' find_tensor_shard / find_state_dict_object lookups.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "h5dcp/h5dcp.hpp"

namespace h5dcp {
namespace {

TEST(Lookup, PlainTensorsAndShardsByOffsetWithAnIndexHint) {
  const auto a = at::zeros({2, 3});
  const auto b = at::ones({2, 3});
  StateDict sd{{"plain", a}, {"sharded", ShardedTensor({4, 3}, {Shard{a, {0, 0}}, Shard{b, {2, 0}}})}};
  EXPECT_TRUE(find_state_dict_object(sd, {"plain", std::nullopt, std::nullopt}).is_same(a));
  // Right hint, wrong hint, no hint: the offset decides.
  EXPECT_TRUE(find_state_dict_object(sd, {"sharded", std::vector<std::int64_t>{2, 0}, 1}).is_same(b));
  EXPECT_TRUE(find_state_dict_object(sd, {"sharded", std::vector<std::int64_t>{2, 0}, 0}).is_same(b));
  EXPECT_TRUE(find_state_dict_object(sd, {"sharded", std::vector<std::int64_t>{0, 0}, std::nullopt}).is_same(a));
  EXPECT_TRUE(find_tensor_shard(sd.at("sharded"), {"sharded", std::vector<std::int64_t>{0, 0}, 7}).is_same(a));
}

TEST(Lookup, MissingKeysAndShardsAreNamed) {
  StateDict sd{{"sharded", ShardedTensor({4}, {Shard{at::zeros({2}), {0}}})}};
  try {
    find_state_dict_object(sd, {"nope", std::nullopt, std::nullopt});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no key 'nope'"), std::string::npos);
  }
  try {
    find_state_dict_object(sd, {"sharded", std::vector<std::int64_t>{2}, std::nullopt});
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no local shard of 'sharded' starts at [2]"), std::string::npos);
  }
  EXPECT_THROW(find_state_dict_object(sd, {"sharded", std::nullopt, std::nullopt}), UsageError);
}

}  // namespace
}  // namespace h5dcp
