// manager/local_tier: the node-local tier's options (issue 50), the
// failure-domain groups they give, each node's directory and the placement
// of a job's copies from its node names.

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "h5dcp/checkpoint_manager.hpp"
#include "h5dcp/error.hpp"
#include "manager/local_tier.hpp"

namespace h5dcp::detail {
namespace {

// ManagerOptions stays an aggregate, its tier off unless asked for.
static_assert(std::is_aggregate_v<ManagerOptions>);
static_assert(std::is_aggregate_v<LocalTierOptions>);

LocalTierOptions valid_options() {
  LocalTierOptions o;
  o.directory = "/tmp/ckpt-{node}";
  return o;
}

// `body` throws UsageError whose message holds `needle`.
template <typename F>
void expect_usage_error(F body, const std::string& needle) {
  try {
    body();
    ADD_FAILURE() << "no UsageError (expected one naming '" << needle << "')";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(LocalTierOptions, DefaultsAreTheIssuesAndTheTierIsOffByDefault) {
  const ManagerOptions plain{/*coordinator=*/1};
  EXPECT_EQ(plain.coordinator, 1);
  EXPECT_FALSE(plain.local.has_value());
  const LocalTierOptions o;
  EXPECT_EQ(o.replicas, 1);
  EXPECT_EQ(o.every_steps, 1);
  EXPECT_EQ(o.drain_every_steps, 0);
  EXPECT_EQ(o.keep, 2);
  EXPECT_TRUE(o.groups.empty());
  EXPECT_TRUE(o.groups_variable.empty());
  EXPECT_TRUE(o.run_id.empty());
}

TEST(LocalTierOptions, ValidOptionsPass) {
  EXPECT_NO_THROW(validate_local_tier(valid_options()));
  auto o = valid_options();
  o.replicas = 0;
  o.every_steps = 5;
  o.drain_every_steps = 20;
  o.keep = 1;
  o.groups = {{"a", "rack1"}, {"b", "rack2"}};
  o.run_id = "12345-20261128T203000Z";
  EXPECT_NO_THROW(validate_local_tier(o));
  o.groups.clear();
  o.groups_variable = "MY_RACKS";
  EXPECT_NO_THROW(validate_local_tier(o));
}

TEST(LocalTierOptions, EachInvalidFieldIsNamed) {
  const auto with = [](auto change) {
    auto o = valid_options();
    change(o);
    return o;
  };
  const std::vector<std::pair<LocalTierOptions, std::string>> cases{
      {with([](auto& o) { o.directory.clear(); }), "directory is empty"},
      {with([](auto& o) { o.replicas = -1; }), "replicas must be >= 0"},
      {with([](auto& o) { o.every_steps = 0; }), "every_steps must be >= 1"},
      {with([](auto& o) { o.drain_every_steps = -3; }), "drain_every_steps must be >= 0"},
      {with([](auto& o) {
         o.every_steps = 4;
         o.drain_every_steps = 10;
       }),
       "must be a multiple of every_steps"},
      {with([](auto& o) { o.keep = 0; }), "keep must be >= 1"},
      {with([](auto& o) {
         o.groups = {{"a", "r1"}};
         o.groups_variable = "RACKS";
       }),
       "groups and groups_variable are both set"},
      {with([](auto& o) {
         o.groups = {{"a", ""}};
       }),
       "empty group for node 'a'"},
      {with([](auto& o) {
         o.groups = {{"", "r1"}};
       }),
       "empty node name"},
      {with([](auto& o) { o.run_id = "run 1"; }), "run_id 'run 1'"},
      {with([](auto& o) { o.run_id = std::string(257, 'x'); }), "at most 256"},
  };
  // A loop variable, not a structured binding: clang 14 cannot capture those.
  for (const auto& c : cases) expect_usage_error([&] { validate_local_tier(c.first); }, c.second);
}

// Settings as comparable pairs (Setting has no ==).
std::vector<std::pair<std::string, std::string>> settings_of(const std::optional<LocalTierOptions>& local) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& s : local_tier_settings(local)) out.emplace_back(s.name, s.value);
  return out;
}

TEST(LocalTierOptions, SettingsDifferExactlyWhenTheOptionsDo) {
  EXPECT_EQ(settings_of(std::nullopt).size(), 1U);
  const auto base = settings_of(valid_options());
  EXPECT_NE(settings_of(std::nullopt), base);
  EXPECT_EQ(settings_of(valid_options()), base);
  auto o = valid_options();
  o.keep = 3;
  EXPECT_NE(settings_of(o), base);
  o = valid_options();
  o.groups = {{"a", "r1"}};
  EXPECT_NE(settings_of(o), base);
  o.groups = {{"a", "r2"}};
  EXPECT_NE(settings_of(o), settings_of([] {
              auto p = valid_options();
              p.groups = {{"a", "r1"}};
              return p;
            }()));
}

TEST(NodeGroups, ParsesPairsIgnoringSpacesAndEmptyEntries) {
  const auto groups = parse_node_groups(" n1=rackA, n2 = rackB,,n3=rackA ,n1=rackA,", "the test");
  const std::map<std::string, std::string> expected{{"n1", "rackA"}, {"n2", "rackB"}, {"n3", "rackA"}};
  EXPECT_EQ(groups, expected);
  EXPECT_TRUE(parse_node_groups("", "the test").empty());
  EXPECT_TRUE(parse_node_groups(" , ", "the test").empty());
}

TEST(NodeGroups, MalformedTextIsAUsageErrorNamingItsSource) {
  expect_usage_error([] { parse_node_groups("n1=a,n2", "MY_VAR"); }, "MY_VAR");
  expect_usage_error([] { parse_node_groups("n1=a,n2", "MY_VAR"); }, "'n2' has no '='");
  expect_usage_error([] { parse_node_groups("=a", "v"); }, "has an empty node");
  expect_usage_error([] { parse_node_groups("n1= ", "v"); }, "has an empty group");
  expect_usage_error([] { parse_node_groups("n1=a,n1=b", "v"); }, "node 'n1' is in two groups, 'a' and 'b'");
}

TEST(NodeGroups, FromTheOptionsOrTheirVariable) {
  auto o = valid_options();
  EXPECT_TRUE(local_tier_groups(o, std::nullopt).empty());
  EXPECT_TRUE(local_tier_groups(o, std::string("n1=a")).empty());  // no variable named: its value is not read
  o.groups = {{"n1", "a"}};
  EXPECT_EQ(local_tier_groups(o, std::nullopt), o.groups);
  o.groups.clear();
  o.groups_variable = "RACKS";
  const std::map<std::string, std::string> expected{{"n1", "a"}, {"n2", "b"}};
  EXPECT_EQ(local_tier_groups(o, std::string("n1=a,n2=b")), expected);
  expect_usage_error([&] { local_tier_groups(o, std::nullopt); }, "names RACKS, which is not set");
  expect_usage_error([&] { local_tier_groups(o, std::string("n1")); }, "environment variable RACKS");
}

TEST(LocalDirectory, EveryPlaceholderIsTheNode) {
  EXPECT_EQ(local_directory_for("/tmp/{node}/ckpt-{node}", "nid001"), "/tmp/nid001/ckpt-nid001");
  EXPECT_EQ(local_directory_for("/local/ckpt", "nid001"), "/local/ckpt");
  EXPECT_EQ(local_directory_for("{node}", "a"), "a");
  EXPECT_EQ(local_directory_for("/x/{nod}/{node", "a"), "/x/{nod}/{node");
}

TEST(LocalTierPlacement, FollowsTheVariablesGroups) {
  // Four nodes of two ranks, two racks: a copy never stays in its rack.
  const std::vector<std::string> rank_nodes{"n0", "n0", "n1", "n1", "n2", "n2", "n3", "n3"};
  auto o = valid_options();
  o.groups_variable = "RACKS";
  const auto p = local_tier_placement(rank_nodes, o, std::string("n0=r0,n1=r0,n2=r1,n3=r1"));
  ASSERT_EQ(p.nodes, (std::vector<std::string>{"n0", "n1", "n2", "n3"}));
  ASSERT_EQ(p.partners.size(), 4U);
  for (std::size_t n = 0; n < p.nodes.size(); ++n) {
    ASSERT_EQ(p.partners[n].size(), 1U);
    const auto partner = static_cast<std::size_t>(p.partners[n][0]);
    EXPECT_NE(p.groups[n], p.groups[partner]) << p.nodes[n] << " -> " << p.nodes[partner];
  }
  for (std::size_t r = 0; r < rank_nodes.size(); ++r) {
    ASSERT_EQ(p.destinations[r].size(), 1U);
    const auto to = static_cast<std::size_t>(p.destinations[r][0]);
    EXPECT_NE(rank_nodes[to], rank_nodes[r]);
  }
  // Two replicas need three racks: two are too few.
  o.replicas = 2;
  EXPECT_THROW(local_tier_placement(rank_nodes, o, std::string("n0=r0,n1=r0,n2=r1,n3=r1")), UsageError);
  // Fitted (a manager's, so that a job on the nodes left still runs): one,
  // outside the rack.
  const auto fitted = local_tier_placement(rank_nodes, o, std::string("n0=r0,n1=r0,n2=r1,n3=r1"), /*fit=*/true);
  EXPECT_EQ(fitted.replicas, 1);
  EXPECT_EQ(fitted.partners[0].size(), 1U);
  EXPECT_EQ(fitted.groups[static_cast<std::size_t>(fitted.partners[0][0])], "r1");
  // Without groups two replicas fit on four nodes, and fitting changes nothing.
  o.groups_variable.clear();
  EXPECT_EQ(local_tier_placement(rank_nodes, o, std::nullopt).partners[0].size(), 2U);
  EXPECT_EQ(local_tier_placement(rank_nodes, o, std::nullopt, /*fit=*/true).replicas, 2);
  // One node: no copy fits.
  EXPECT_EQ(local_tier_placement({"n0", "n0"}, o, std::nullopt, /*fit=*/true).replicas, 0);
}

}  // namespace
}  // namespace h5dcp::detail
