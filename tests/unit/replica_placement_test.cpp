// plan/replica_placement: which nodes hold the copies of each node's
// node-local checkpoint, and which rank sends its data to which rank.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "h5dcp/error.hpp"
#include "plan/replica_placement.hpp"

namespace h5dcp::detail {
namespace {

std::string node_name(int n) { return "node" + std::to_string(n); }

// The node of every rank: node n has ranks_per_node[n] ranks; the ranks are
// dealt round robin over the nodes (interleaved) or node by node.
std::vector<std::string> rank_nodes_of(const std::vector<int>& ranks_per_node, bool interleaved) {
  std::vector<std::string> nodes;
  if (!interleaved) {
    for (std::size_t n = 0; n < ranks_per_node.size(); ++n) {
      for (int r = 0; r < ranks_per_node[n]; ++r) nodes.push_back(node_name(static_cast<int>(n)));
    }
    return nodes;
  }
  for (int round = 0; round < *std::max_element(ranks_per_node.begin(), ranks_per_node.end()); ++round) {
    for (std::size_t n = 0; n < ranks_per_node.size(); ++n) {
      if (round < ranks_per_node[n]) nodes.push_back(node_name(static_cast<int>(n)));
    }
  }
  return nodes;
}

// Node n in group "g<n % groups>" (spread) or in contiguous blocks.
std::map<std::string, std::string> groups_of(int nodes, int groups, bool blocks) {
  std::map<std::string, std::string> map;
  for (int n = 0; n < nodes; ++n) {
    const auto g = blocks ? n * groups / nodes : n % groups;
    map[node_name(n)] = "g" + std::to_string(g);
  }
  return map;
}

// Every property the placement promises, checked from its input.
void expect_valid(const ReplicaPlacement& p, const std::vector<std::string>& rank_nodes,
                  const std::map<std::string, std::string>& groups, int replicas) {
  const std::set<std::string> names(rank_nodes.begin(), rank_nodes.end());
  ASSERT_EQ(p.nodes, std::vector<std::string>(names.begin(), names.end()));
  ASSERT_EQ(p.replicas, replicas);
  ASSERT_EQ(p.groups.size(), p.nodes.size());
  ASSERT_EQ(p.node_of_rank.size(), rank_nodes.size());
  for (std::size_t r = 0; r < rank_nodes.size(); ++r) {
    const auto node = static_cast<std::size_t>(p.node_of_rank[r]);
    ASSERT_EQ(p.nodes[node], rank_nodes[r]);
    ASSERT_EQ(p.node_ranks[node][static_cast<std::size_t>(p.local_index[r])], static_cast<int>(r));
  }
  std::vector<int> held(p.nodes.size(), 0);
  for (std::size_t n = 0; n < p.nodes.size(); ++n) {
    EXPECT_EQ(p.groups[n], groups.empty() ? p.nodes[n] : groups.at(p.nodes[n]));
    ASSERT_EQ(p.partners[n].size(), static_cast<std::size_t>(replicas)) << p.nodes[n];
    std::set<std::string> partner_groups{p.groups[n]};
    for (const auto partner : p.partners[n]) {
      EXPECT_NE(partner, static_cast<int>(n)) << p.nodes[n] << " is its own partner";
      // Distinct from the node's group and from each other's: distinct nodes.
      EXPECT_TRUE(partner_groups.insert(p.groups[static_cast<std::size_t>(partner)]).second)
          << p.nodes[n] << "'s partner " << p.nodes[static_cast<std::size_t>(partner)] << " shares a group";
      ++held[static_cast<std::size_t>(partner)];
    }
  }
  const auto [least, most] = std::minmax_element(held.begin(), held.end());
  if (groups.empty()) {
    // The shift: every node holds exactly `replicas` nodes' copies.
    EXPECT_EQ(*least, replicas);
    EXPECT_EQ(*most, replicas);
  }
  // Rank level: each rank's k-th copy goes to its partner node k, to the rank
  // of the same local index modulo that node's rank count, and the receivers
  // list exactly these.
  std::multiset<std::pair<int, int>> received;
  for (std::size_t r = 0; r < p.sources.size(); ++r) {
    for (const auto& s : p.sources[r]) {
      received.insert({s.rank, s.replica});
      EXPECT_EQ(p.destinations[static_cast<std::size_t>(s.rank)][static_cast<std::size_t>(s.replica)],
                static_cast<int>(r));
    }
  }
  EXPECT_EQ(received.size(), rank_nodes.size() * static_cast<std::size_t>(replicas));
  for (std::size_t r = 0; r < rank_nodes.size(); ++r) {
    ASSERT_EQ(p.destinations[r].size(), static_cast<std::size_t>(replicas));
    const auto node = static_cast<std::size_t>(p.node_of_rank[r]);
    for (int k = 0; k < replicas; ++k) {
      const auto destination = p.destinations[r][static_cast<std::size_t>(k)];
      const auto partner = static_cast<std::size_t>(p.partners[node][static_cast<std::size_t>(k)]);
      const auto& ranks = p.node_ranks[partner];
      EXPECT_EQ(destination, ranks[static_cast<std::size_t>(p.local_index[r]) % ranks.size()]);
      EXPECT_EQ(received.count({static_cast<int>(r), k}), 1u);
    }
  }
}

std::vector<std::vector<int>> rank_layouts(int nodes) {
  std::vector<std::vector<int>> layouts;
  for (int per = 1; per <= 4; ++per) layouts.emplace_back(static_cast<std::size_t>(nodes), per);
  std::vector<int> uneven;
  for (int n = 0; n < nodes; ++n) uneven.push_back(1 + (n * 5 + 2) % 4);
  layouts.push_back(uneven);
  return layouts;
}

TEST(ReplicaPlacement, EveryPossiblePlacementKeepsItsPromisesWithoutGroups) {
  int placed = 0;
  for (int nodes = 1; nodes <= 8; ++nodes) {
    for (const auto& layout : rank_layouts(nodes)) {
      for (const bool interleaved : {false, true}) {
        const auto rank_nodes = rank_nodes_of(layout, interleaved);
        for (int replicas = 0; replicas <= 3; ++replicas) {
          SCOPED_TRACE(std::to_string(nodes) + " nodes, " + std::to_string(replicas) + " replicas");
          if (replicas >= nodes) {
            EXPECT_THROW(place_replicas(rank_nodes, {}, replicas), UsageError);
            continue;
          }
          expect_valid(place_replicas(rank_nodes, {}, replicas), rank_nodes, {}, replicas);
          ++placed;
        }
      }
    }
  }
  EXPECT_EQ(placed, 2 * 5 * (1 + 2 + 3 + 4 * 5));  // nodes n allow min(n, 4) replica counts
}

TEST(ReplicaPlacement, WithGroupsNoCopyShareAGroupWithItsNodeOrAnotherCopy) {
  int placed = 0;
  for (int nodes = 2; nodes <= 8; ++nodes) {
    for (int group_count = 2; group_count <= std::min(4, nodes); ++group_count) {
      for (const bool blocks : {false, true}) {
        const auto groups = groups_of(nodes, group_count, blocks);
        for (const auto& layout : rank_layouts(nodes)) {
          const auto rank_nodes = rank_nodes_of(layout, true);
          for (int replicas = 0; replicas <= 3; ++replicas) {
            SCOPED_TRACE(std::to_string(nodes) + " nodes in " + std::to_string(group_count) + " groups, " +
                         std::to_string(replicas) + " replicas");
            if (replicas >= group_count) {
              EXPECT_THROW(place_replicas(rank_nodes, groups, replicas), UsageError);
              continue;
            }
            const auto p = place_replicas(rank_nodes, groups, replicas);
            expect_valid(p, rank_nodes, groups, replicas);
            ++placed;
            if (nodes % group_count == 0 && !blocks) {
              // Equal groups: the load is as even as without groups.
              std::vector<int> held(p.nodes.size(), 0);
              for (const auto& partners : p.partners) {
                for (const auto partner : partners) ++held[static_cast<std::size_t>(partner)];
              }
              EXPECT_EQ(*std::max_element(held.begin(), held.end()) - *std::min_element(held.begin(), held.end()), 0);
            }
          }
        }
      }
    }
  }
  EXPECT_GT(placed, 300);
}

TEST(ReplicaPlacement, UnevenGroupsStillBalanceTheLoadAsTheyCan) {
  // Three nodes in rack a, one in rack b, one replica: b must hold a's three
  // copies, and b's copy goes to the node after it in the interleaved order
  // (a1, b1, a2, a3): a2.
  const std::map<std::string, std::string> groups{{"a1", "a"}, {"a2", "a"}, {"a3", "a"}, {"b1", "b"}};
  const auto p = place_replicas({"a1", "a2", "a3", "b1"}, groups, 1);
  expect_valid(p, {"a1", "a2", "a3", "b1"}, groups, 1);
  EXPECT_EQ(p.partners, (std::vector<std::vector<int>>{{3}, {3}, {3}, {1}}));
}

TEST(ReplicaPlacement, WithoutGroupsItIsTheShiftOverTheNodesByName) {
  const auto p = place_replicas({"c", "a", "b", "a", "d"}, {}, 2);
  EXPECT_EQ(p.nodes, (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(p.partners, (std::vector<std::vector<int>>{{1, 2}, {2, 3}, {3, 0}, {0, 1}}));
  EXPECT_EQ(p.node_ranks[0], (std::vector<int>{1, 3}));
  // Rank 3 (local index 1 on a) sends to b's only rank and to c's only rank;
  // rank 0 (on c) to d and to a's first rank.
  EXPECT_EQ(p.destinations[3], (std::vector<int>{2, 0}));
  EXPECT_EQ(p.destinations[0], (std::vector<int>{4, 1}));
  // Rank 1 (a's first) receives replica 0 of d's rank 4 and replica 1 of c's rank 0.
  ASSERT_EQ(p.sources[1].size(), 2u);
  EXPECT_EQ(p.sources[1][0].rank, 0);
  EXPECT_EQ(p.sources[1][0].replica, 1);
  EXPECT_EQ(p.sources[1][1].rank, 4);
  EXPECT_EQ(p.sources[1][1].replica, 0);
}

TEST(ReplicaPlacement, TheNodesPlacementDoesNotDependOnTheRankOrder) {
  auto rank_nodes = rank_nodes_of({3, 1, 2, 4, 2, 1, 3}, false);
  const auto groups = groups_of(7, 3, false);
  const auto first = place_replicas(rank_nodes, groups, 2);
  std::mt19937 random(50);
  for (int trial = 0; trial < 20; ++trial) {
    std::shuffle(rank_nodes.begin(), rank_nodes.end(), random);
    const auto p = place_replicas(rank_nodes, groups, 2);
    expect_valid(p, rank_nodes, groups, 2);
    EXPECT_EQ(p.nodes, first.nodes);
    EXPECT_EQ(p.groups, first.groups);
    EXPECT_EQ(p.partners, first.partners);
    for (std::size_t n = 0; n < p.nodes.size(); ++n) EXPECT_EQ(p.node_ranks[n].size(), first.node_ranks[n].size());
  }
  // And the same input gives the same rank-level pairing.
  const auto again = place_replicas(rank_nodes, groups, 2);
  EXPECT_EQ(again.destinations, place_replicas(rank_nodes, groups, 2).destinations);
}

TEST(ReplicaPlacement, NoReplicasIsNoCopies) {
  const auto p = place_replicas({"n1"}, {}, 0);
  ASSERT_EQ(p.partners.size(), 1u);
  EXPECT_TRUE(p.partners[0].empty());
  EXPECT_TRUE(p.destinations[0].empty());
  EXPECT_TRUE(p.sources[0].empty());
}

std::string message_of(const std::vector<std::string>& rank_nodes, const std::map<std::string, std::string>& groups,
                       int replicas) {
  try {
    place_replicas(rank_nodes, groups, replicas);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ReplicaPlacement, ImpossiblePlacementsSayWhatWasAskedAndWhatThereIs) {
  EXPECT_EQ(message_of({"n1", "n2", "n1"}, {}, 2),
            "replica placement: 2 replicas on other nodes need at least 3 nodes; the job has 2 (n1, n2)");
  EXPECT_EQ(message_of({"n1", "n2", "n3"}, {{"n1", "r1"}, {"n2", "r1"}, {"n3", "r2"}}, 2),
            "replica placement: 2 replicas outside each node's failure-domain group need at least 3 groups; the "
            "job's 3 nodes are in 2 (r1, r2)");
  EXPECT_EQ(message_of({"n1", "n2"}, {{"n1", "r1"}}, 1),
            "replica placement: node n2 has no failure-domain group (every node of the job needs one when groups "
            "are given)");
  EXPECT_EQ(message_of({"n1", "n2"}, {}, -1), "replica placement: the number of replicas must be >= 0, not -1");
  EXPECT_EQ(message_of({}, {}, 0), "replica placement: the saving job has no ranks");
  EXPECT_EQ(message_of({"n1", ""}, {}, 0), "replica placement: rank 1 has an empty node name");
  // Groups of nodes that are not in the job do not count.
  EXPECT_EQ(
      message_of({"n1", "n2"}, {{"n1", "r1"}, {"n2", "r1"}, {"n9", "r2"}}, 1).find("in 1 (r1)") != std::string::npos,
      true);
}

}  // namespace
}  // namespace h5dcp::detail
