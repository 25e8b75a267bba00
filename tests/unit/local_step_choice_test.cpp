// plan/local_step_choice: the node-local step a restarted job recovers
// from, checked against every loss of nodes the replicas cover, with the
// copies placed by plan/replica_placement.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "h5dcp/error.hpp"
#include "plan/local_step_choice.hpp"
#include "plan/replica_placement.hpp"

namespace h5dcp::detail {
namespace {

std::string node_name(int n) { return "n" + std::to_string(n); }

std::string file_of(std::int64_t step, int owner, const std::string& holder) {
  return "/local/" + holder + "/step" + std::to_string(step) + "/rank" + std::to_string(owner) + ".h5";
}

// What every node holds after saving `step` with placement `p`: each rank's
// own copy on its node and its replicas on the destinations' nodes.
std::map<std::string, LocalStepReport> saved(const ReplicaPlacement& p, const std::vector<std::string>& rank_nodes,
                                             std::int64_t step, const std::string& run_id) {
  std::map<std::string, LocalStepReport> held;
  for (const auto& node : p.nodes) held[node] = {step, run_id, rank_nodes, {}};
  for (std::size_t r = 0; r < rank_nodes.size(); ++r) {
    const auto owner = static_cast<int>(r);
    held[rank_nodes[r]].copies.push_back({owner, file_of(step, owner, rank_nodes[r]), true, ""});
    for (const auto destination : p.destinations[r]) {
      const auto& holder = rank_nodes[static_cast<std::size_t>(destination)];
      held[holder].copies.push_back({owner, file_of(step, owner, holder), true, ""});
    }
  }
  return held;
}

// The reports of the nodes that survive `lost`, from one or more saves.
std::vector<SurvivingNodeReport> surviving(const std::vector<std::map<std::string, LocalStepReport>>& saves,
                                           const std::set<std::string>& lost) {
  std::map<std::string, SurvivingNodeReport> nodes;
  for (const auto& save : saves) {
    for (const auto& [node, step] : save) {
      if (lost.count(node) != 0) continue;
      nodes[node].node = node;
      nodes[node].steps.push_back(step);
    }
  }
  std::vector<SurvivingNodeReport> reports;
  for (auto& [node, report] : nodes) reports.push_back(report);
  return reports;
}

// The choice serves every owner from a surviving node that reported an
// intact copy of its data, from its own node when that survived.
void expect_served(const LocalStepChoice& choice, const std::vector<SurvivingNodeReport>& reports,
                   const std::vector<std::string>& rank_nodes, const std::set<std::string>& lost) {
  ASSERT_EQ(choice.sources.size(), rank_nodes.size());
  EXPECT_EQ(choice.rank_nodes, rank_nodes);
  for (std::size_t owner = 0; owner < rank_nodes.size(); ++owner) {
    const auto& source = choice.sources[owner];
    EXPECT_EQ(lost.count(source.node), 0u) << "owner " << owner << " served by lost node " << source.node;
    bool held = false;
    for (const auto& node : reports) {
      if (node.node != source.node) continue;
      for (const auto& step : node.steps) {
        if (step.step != *choice.step) continue;
        for (const auto& copy : step.copies) {
          held = held || (copy.owner_rank == static_cast<int>(owner) && copy.intact && copy.file == source.file);
        }
      }
    }
    EXPECT_TRUE(held) << "owner " << owner << ": " << source.node << " holds no intact " << source.file;
    if (lost.count(rank_nodes[owner]) == 0) {
      EXPECT_EQ(source.node, rank_nodes[owner]);
    }
  }
}

// Every subset of `items` with at most `most` elements.
std::vector<std::set<std::string>> subsets(const std::vector<std::string>& items, std::size_t most) {
  std::vector<std::set<std::string>> all;
  for (unsigned mask = 0; mask < (1u << items.size()); ++mask) {
    std::set<std::string> subset;
    for (std::size_t i = 0; i < items.size(); ++i) {
      if ((mask & (1u << i)) != 0) subset.insert(items[i]);
    }
    if (subset.size() <= most) all.push_back(subset);
  }
  return all;
}

std::vector<std::string> rank_nodes_of(int nodes, int layout) {
  std::vector<std::string> rank_nodes;
  for (int n = 0; n < nodes; ++n) {
    const auto ranks = layout == 0 ? 1 : layout == 1 ? 2 : 1 + (n * 5 + 2) % 4;  // 1, 2, or 3 1 4 2 ...
    for (int r = 0; r < ranks; ++r) rank_nodes.push_back(node_name(n));
  }
  return rank_nodes;
}

TEST(LocalStepChoice, EveryLossOfAtMostReplicasNodesIsRecovered) {
  int patterns = 0;
  int uncovered = 0;
  for (int nodes = 1; nodes <= 8; ++nodes) {
    for (int layout = 0; layout < 3; ++layout) {
      const auto rank_nodes = rank_nodes_of(nodes, layout);
      for (int replicas = 0; replicas <= std::min(3, nodes - 1); ++replicas) {
        const auto p = place_replicas(rank_nodes, {}, replicas);
        const auto save = saved(p, rank_nodes, 7, "run-a");
        for (const auto& lost : subsets(p.nodes, static_cast<std::size_t>(replicas) + 1)) {
          if (lost.size() == p.nodes.size()) continue;  // nobody left to report
          SCOPED_TRACE(std::to_string(nodes) + " nodes, " + std::to_string(replicas) + " replicas, " +
                       std::to_string(lost.size()) + " lost");
          const auto reports = surviving({save}, lost);
          const auto choice = choose_local_step("run-a", std::nullopt, reports);
          if (lost.size() <= static_cast<std::size_t>(replicas)) {
            ASSERT_EQ(choice.step, std::optional<std::int64_t>(7));
            expect_served(choice, reports, rank_nodes, lost);
            EXPECT_TRUE(choice.skipped.empty());
            EXPECT_TRUE(choice.rejected.empty());
            ++patterns;
            continue;
          }
          // One more loss than the replicas: recovered exactly when some copy
          // of every node's data survives.
          std::string first_uncovered;
          for (std::size_t n = 0; n < p.nodes.size() && first_uncovered.empty(); ++n) {
            bool all_lost = lost.count(p.nodes[n]) != 0;
            for (const auto partner : p.partners[n]) all_lost = all_lost && lost.count(p.nodes[partner]) != 0;
            if (all_lost) first_uncovered = p.nodes[n];
          }
          if (first_uncovered.empty()) {
            ASSERT_EQ(choice.step, std::optional<std::int64_t>(7));
            expect_served(choice, reports, rank_nodes, lost);
            continue;
          }
          ++uncovered;
          EXPECT_FALSE(choice.step.has_value());
          ASSERT_EQ(choice.rejected.size(), 1u);
          const auto& line = choice.rejected[0];
          EXPECT_EQ(line.rfind("step 7: the data of node", 0), 0u) << line;
          EXPECT_NE(line.find(" " + first_uncovered + " (rank"), std::string::npos) << line;
          EXPECT_NE(line.find("(lost: "), std::string::npos) << line;
        }
      }
    }
  }
  EXPECT_GT(patterns, 1000);
  EXPECT_GT(uncovered, 100);
}

TEST(LocalStepChoice, WithGroupsEveryLossOfAtMostReplicasGroupsIsRecovered) {
  int patterns = 0;
  for (int nodes = 2; nodes <= 8; ++nodes) {
    for (int group_count = 2; group_count <= std::min(4, nodes); ++group_count) {
      for (const bool blocks : {false, true}) {
        std::map<std::string, std::string> groups;
        std::map<std::string, std::vector<std::string>> members;
        for (int n = 0; n < nodes; ++n) {
          const auto g = "rack" + std::to_string(blocks ? n * group_count / nodes : n % group_count);
          groups[node_name(n)] = g;
          members[g].push_back(node_name(n));
        }
        std::vector<std::string> group_names;
        for (const auto& [g, m] : members) group_names.push_back(g);
        for (int layout = 0; layout < 3; ++layout) {
          const auto rank_nodes = rank_nodes_of(nodes, layout);
          for (int replicas = 0; replicas < group_count && replicas <= 3; ++replicas) {
            const auto p = place_replicas(rank_nodes, groups, replicas);
            const auto save = saved(p, rank_nodes, 3, "run-g");
            SCOPED_TRACE(std::to_string(nodes) + " nodes in " + std::to_string(group_count) + " racks, " +
                         std::to_string(replicas) + " replicas");
            // Whole racks lost, and any further nodes up to `replicas` losses in all.
            for (const auto& lost_groups : subsets(group_names, static_cast<std::size_t>(replicas))) {
              std::set<std::string> lost;
              for (const auto& g : lost_groups) lost.insert(members[g].begin(), members[g].end());
              if (lost.size() == p.nodes.size()) continue;
              const auto reports = surviving({save}, lost);
              const auto choice = choose_local_step("run-g", std::nullopt, reports);
              ASSERT_EQ(choice.step, std::optional<std::int64_t>(3)) << lost_groups.size() << " racks lost";
              expect_served(choice, reports, rank_nodes, lost);
              ++patterns;
            }
            for (const auto& lost : subsets(p.nodes, static_cast<std::size_t>(replicas))) {
              if (lost.size() == p.nodes.size()) continue;
              const auto reports = surviving({save}, lost);
              const auto choice = choose_local_step("run-g", std::nullopt, reports);
              ASSERT_EQ(choice.step, std::optional<std::int64_t>(3));
              expect_served(choice, reports, rank_nodes, lost);
              ++patterns;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(patterns, 1000);
}

// Four nodes of two ranks, two replicas: n0's copies on n1 and n2.
struct FourNodes {
  std::vector<std::string> rank_nodes = rank_nodes_of(4, 1);
  ReplicaPlacement p = place_replicas(rank_nodes, {}, 2);
};

TEST(LocalStepChoice, ALostNodesRanksAreSpreadOverItsReplicas) {
  const FourNodes f;
  ASSERT_EQ(f.p.partners[0], (std::vector<int>{1, 2}));
  const auto reports = surviving({saved(f.p, f.rank_nodes, 5, "r")}, {"n0"});
  const auto choice = choose_local_step("r", std::nullopt, reports);
  ASSERT_EQ(choice.step, std::optional<std::int64_t>(5));
  // n1 and n2 serve their own two ranks each; n0's ranks 0 and 1 go one to each.
  EXPECT_EQ(choice.sources[0].node, "n1");
  EXPECT_EQ(choice.sources[1].node, "n2");
  EXPECT_EQ(choice.sources[1].file, file_of(5, 1, "n2"));
  EXPECT_EQ(choice.sources[2].node, "n1");
}

TEST(LocalStepChoice, CorruptCopiesAreSkippedAndNamedAndAnotherCopyServes) {
  const FourNodes f;
  auto save = saved(f.p, f.rank_nodes, 9, "r");
  for (auto& copy : save["n1"].copies) {
    if (copy.owner_rank == 0) {
      copy.intact = false;
      copy.problem = "checksum mismatch in block 2";
    }
  }
  const auto choice = choose_local_step("r", std::nullopt, surviving({save}, {"n0"}));
  ASSERT_EQ(choice.step, std::optional<std::int64_t>(9));
  EXPECT_EQ(choice.sources[0].node, "n2");
  ASSERT_EQ(choice.skipped.size(), 1u);
  EXPECT_EQ(choice.skipped[0].node, "n1");
  EXPECT_EQ(choice.skipped[0].step, 9);
  EXPECT_EQ(choice.skipped[0].owner_rank, 0);
  EXPECT_EQ(choice.skipped[0].file, file_of(9, 0, "n1"));
  EXPECT_EQ(choice.skipped[0].reason, "checksum mismatch in block 2");

  // Both remaining copies of rank 0 corrupt: step 9 fails, the older step 4 serves.
  for (auto& copy : save["n2"].copies) {
    if (copy.owner_rank == 0) copy.intact = false;  // no reason given
  }
  const auto older = saved(f.p, f.rank_nodes, 4, "r");
  const auto fallback = choose_local_step("r", std::nullopt, surviving({save, older}, {"n0"}));
  ASSERT_EQ(fallback.step, std::optional<std::int64_t>(4));
  ASSERT_EQ(fallback.rejected.size(), 1u);
  EXPECT_EQ(fallback.rejected[0],
            "step 9: the data of node n0 (rank 0) has no intact copy (lost: n0; copies that failed their checks: 2)");
  ASSERT_EQ(fallback.skipped.size(), 2u);
  EXPECT_EQ(fallback.skipped[1].reason, "failed its checks");
  expect_served(fallback, surviving({save, older}, {"n0"}), f.rank_nodes, {"n0"});
}

// A copy found damaged only as it is served (the survey reads no block):
// marked, the choice goes to its replica, then, with none left, to nothing;
// marking what the reports do not hold as an intact copy is refused, so a
// caller that chooses again always has fewer copies to choose from.
TEST(LocalStepChoice, CopiesFoundDamagedWhenServedArePassedOverForTheirReplicas) {
  const FourNodes f;
  auto reports = surviving({saved(f.p, f.rank_nodes, 9, "r")}, {});
  auto choice = choose_local_step("r", std::nullopt, reports);
  ASSERT_EQ(choice.step, std::optional<std::int64_t>(9));
  const auto first = choice.sources[0];
  EXPECT_EQ(first.node, f.rank_nodes[0]);

  mark_damaged(reports, choice, {{0, "checksum mismatch in rows 0-3 of 'w'"}});
  EXPECT_THROW(mark_damaged(reports, choice, {{0, "again"}}), UsageError);  // already marked
  choice = choose_local_step("r", std::nullopt, reports);
  ASSERT_EQ(choice.step, std::optional<std::int64_t>(9));
  EXPECT_NE(choice.sources[0].node, first.node);
  ASSERT_EQ(choice.skipped.size(), 1u);
  EXPECT_EQ(choice.skipped[0].node, first.node);
  EXPECT_EQ(choice.skipped[0].file, first.file);
  EXPECT_EQ(choice.skipped[0].reason, "checksum mismatch in rows 0-3 of 'w'");
  for (std::size_t owner = 1; owner < f.rank_nodes.size(); ++owner)
    EXPECT_EQ(choice.sources[owner].node, f.rank_nodes[owner]);  // the others as before

  // Every replica damaged too: the step is rejected, each copy named.
  while (choice.step) {
    mark_damaged(reports, choice, {{0, "truncated"}});
    choice = choose_local_step("r", std::nullopt, reports);
  }
  EXPECT_EQ(choice.skipped.size(), 1u + f.p.destinations[0].size());
  ASSERT_EQ(choice.rejected.size(), 1u);

  LocalStepChoice none;
  EXPECT_THROW(mark_damaged(reports, none, {{0, "x"}}), UsageError);
  choice.step = 9;
  choice.sources = {{"n9", "/nowhere"}};
  EXPECT_THROW(mark_damaged(reports, choice, {{0, "x"}}), UsageError);
  EXPECT_THROW(mark_damaged(reports, choice, {{1, "x"}}), UsageError);  // no source of rank 1
}

TEST(LocalStepChoice, CopiesOfAnotherRunAreNeverMixedIn) {
  const FourNodes f;
  // A newer step of another run on every node, and step 6 of this run.
  const auto other = saved(f.p, f.rank_nodes, 8, "run-old");
  const auto ours = saved(f.p, f.rank_nodes, 6, "run-new");
  const auto choice = choose_local_step("run-new", std::nullopt, surviving({other, ours}, {"n3"}));
  ASSERT_EQ(choice.step, std::optional<std::int64_t>(6));
  ASSERT_FALSE(choice.skipped.empty());
  for (const auto& skipped : choice.skipped) {
    EXPECT_EQ(skipped.step, 8);
    EXPECT_EQ(skipped.reason, "a copy of another run (run-old, not run-new)");
  }
  EXPECT_EQ(choice.skipped.size(), 3u * 2u * 3u);  // 3 surviving nodes, 2 own + 4 replica copies each
  EXPECT_TRUE(choice.rejected.empty());

  // A node whose copy of this step is of another run does not complete it:
  // rank 0's data is on n0 (lost), n1 (this run) and n2 (another run's files).
  auto mixed = saved(f.p, f.rank_nodes, 6, "run-new");
  mixed["n1"].run_id = "run-old";
  const auto none = choose_local_step("run-new", std::nullopt, surviving({mixed}, {"n0", "n2"}));
  EXPECT_FALSE(none.step.has_value());
  ASSERT_EQ(none.rejected.size(), 1u);
  EXPECT_NE(none.rejected[0].find("node n0 (ranks 0, 1)"), std::string::npos) << none.rejected[0];
  EXPECT_NE(none.rejected[0].find("(lost: n0, n2)"), std::string::npos) << none.rejected[0];
}

TEST(LocalStepChoice, TheSharedCheckpointWinsWhenItIsAsNewAsTheLocalSteps) {
  const FourNodes f;
  const auto reports = surviving({saved(f.p, f.rank_nodes, 10, "r"), saved(f.p, f.rank_nodes, 12, "r")}, {});
  const auto equal = choose_local_step("r", 12, reports);
  EXPECT_FALSE(equal.step.has_value());
  EXPECT_EQ(equal.rejected, (std::vector<std::string>{"step 12: not newer than the shared checkpoint (step 12)",
                                                      "step 10: not newer than the shared checkpoint (step 12)"}));
  EXPECT_FALSE(choose_local_step("r", 20, reports).step.has_value());
  EXPECT_EQ(choose_local_step("r", 11, reports).step, std::optional<std::int64_t>(12));
  EXPECT_EQ(choose_local_step("r", std::nullopt, reports).step, std::optional<std::int64_t>(12));
  // Nothing local at all: no step, nothing to say.
  const auto nothing = choose_local_step("r", 3, {});
  EXPECT_FALSE(nothing.step.has_value());
  EXPECT_TRUE(nothing.rejected.empty());
}

TEST(LocalStepChoice, TheChoiceDoesNotDependOnTheOrderOfTheReports) {
  const FourNodes f;
  auto reports = surviving({saved(f.p, f.rank_nodes, 2, "r"), saved(f.p, f.rank_nodes, 1, "r")}, {"n2"});
  const auto first = choose_local_step("r", std::nullopt, reports);
  std::mt19937 random(50);
  for (int trial = 0; trial < 10; ++trial) {
    std::shuffle(reports.begin(), reports.end(), random);
    for (auto& node : reports) std::shuffle(node.steps.begin(), node.steps.end(), random);
    const auto choice = choose_local_step("r", std::nullopt, reports);
    ASSERT_EQ(choice.step, first.step);
    for (std::size_t owner = 0; owner < first.sources.size(); ++owner) {
      EXPECT_EQ(choice.sources[owner].node, first.sources[owner].node);
      EXPECT_EQ(choice.sources[owner].file, first.sources[owner].file);
    }
  }
}

TEST(LocalStepChoice, NodesThatDisagreeOnTheSavingJobOrOwnersOutsideItAreRejected) {
  const FourNodes f;
  auto save = saved(f.p, f.rank_nodes, 5, "r");
  save["n3"].rank_nodes.pop_back();
  auto choice = choose_local_step("r", std::nullopt, surviving({save}, {}));
  EXPECT_FALSE(choice.step.has_value());
  EXPECT_EQ(choice.rejected, (std::vector<std::string>{"step 5: nodes n0 and n3 disagree on the job that saved it"}));

  save = saved(f.p, f.rank_nodes, 5, "r");
  save["n1"].copies.push_back({42, "/local/n1/stray.h5", true, ""});
  choice = choose_local_step("r", std::nullopt, surviving({save}, {}));
  ASSERT_EQ(choice.step, std::optional<std::int64_t>(5));
  ASSERT_EQ(choice.skipped.size(), 1u);
  EXPECT_EQ(choice.skipped[0].reason, "owner rank 42 is not a rank of the job that saved it (8 ranks)");
}

}  // namespace
}  // namespace h5dcp::detail
