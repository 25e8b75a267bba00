// The node-local tier's start at 1-4 ranks (issue 50): the node survey
// (H5DCP_NODE_NAME fakes 1-3 nodes on one machine), every rank computing the
// same replica placement from it, the groups of an environment variable, and
// the manager checking and keeping its LocalTierOptions without using them.

#include <gtest/gtest.h>
#include <mpi.h>
#include <stdlib.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.hpp"
#include "comm/node_survey.hpp"
#include "h5dcp/checkpoint_manager.hpp"
#include "h5dcp/error.hpp"
#include "manager/local_tier.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

// Sets an environment variable for a scope (unset before and after).
class ScopedVariable {
 public:
  ScopedVariable(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ~ScopedVariable() { ::unsetenv(name_.c_str()); }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  std::string name_;
};

// How many nodes the ranks fake: up to three, at least one rank each.
int fake_node_count() { return std::min(test::world_size(), 3); }

// The fake node of `rank`: the ranks in blocks, the names descending so that
// the rank order is not the name order ("node-c" holds rank 0).
std::string fake_node_of(int rank) {
  const int n = rank * fake_node_count() / test::world_size();
  return std::string("node-") + static_cast<char>('c' - n);
}

// Everything the placement decides, as text.
std::string describe(const detail::ReplicaPlacement& p) {
  std::string s = "replicas " + std::to_string(p.replicas) + "\n";
  for (std::size_t n = 0; n < p.nodes.size(); ++n) {
    s += p.nodes[n] + " (" + p.groups[n] + "):";
    for (const auto partner : p.partners[n]) s += " " + p.nodes[static_cast<std::size_t>(partner)];
    s += "\n";
  }
  for (std::size_t r = 0; r < p.destinations.size(); ++r) {
    s += "rank " + std::to_string(r) + " ->";
    for (const auto d : p.destinations[r]) s += " " + std::to_string(d);
    s += " <-";
    for (const auto& src : p.sources[r]) s += " " + std::to_string(src.rank) + "/" + std::to_string(src.replica);
    s += "\n";
  }
  return s;
}

// Rank 0's `text`, on every rank.
std::string rank0_text(const std::string& text) {
  auto length = static_cast<int>(text.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string out = text;
  out.resize(static_cast<std::size_t>(length));
  MPI_Bcast(out.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return out;
}

LocalTierOptions tier_options(const std::string& directory) {
  LocalTierOptions o;
  o.directory = directory + "/local-{node}";
  return o;
}

TEST(NodeSurvey, EveryRankSeesEveryRanksNode) {
  const detail::Comm comm(MPI_COMM_WORLD);
  {
    // Unfaked: mpiexec runs every rank on this machine.
    const ScopedVariable unset(detail::kNodeNameVariable, std::nullopt);
    const auto nodes = detail::survey_nodes(comm);
    ASSERT_EQ(nodes.size(), static_cast<std::size_t>(test::world_size()));
    for (const auto& node : nodes) EXPECT_EQ(node, detail::processor_name());
  }
  const ScopedVariable fake(detail::kNodeNameVariable, fake_node_of(test::world_rank()));
  EXPECT_EQ(detail::survey_node_name(), fake_node_of(test::world_rank()));
  const auto nodes = detail::survey_nodes(comm);
  ASSERT_EQ(nodes.size(), static_cast<std::size_t>(test::world_size()));
  for (int r = 0; r < test::world_size(); ++r) EXPECT_EQ(nodes[static_cast<std::size_t>(r)], fake_node_of(r)) << r;
}

TEST(NodeSurvey, ANameThatCannotBeAFileNameFailsOnEveryRank) {
  const detail::Comm comm(MPI_COMM_WORLD);
  const auto bad = test::world_size() - 1;  // the last rank only
  const ScopedVariable fake(detail::kNodeNameVariable, test::world_rank() == bad ? "rack/node" : "node-a");
  const auto error = test::expect_checkpoint_error([&] { detail::survey_nodes(comm); });
  EXPECT_EQ(error.failures().count(bad), 1U) << error.what();
  EXPECT_NE(std::string(error.what()).find("rack/node"), std::string::npos) << error.what();
}

TEST(LocalTierPlacement, EveryRankComputesTheSamePlacement) {
  test::TempDir dir;
  const detail::Comm comm(MPI_COMM_WORLD);
  const ScopedVariable fake(detail::kNodeNameVariable, fake_node_of(test::world_rank()));
  const auto options = tier_options(dir.path());
  if (fake_node_count() < 2) {
    // One node: its one replica has nowhere to go.
    EXPECT_THROW(detail::survey_local_tier(comm, options), UsageError);
    return;
  }
  const auto placement = detail::survey_local_tier(comm, options);
  const auto mine = describe(placement);
  EXPECT_EQ(mine, rank0_text(mine));
  ASSERT_EQ(placement.nodes.size(), static_cast<std::size_t>(fake_node_count()));
  ASSERT_EQ(placement.destinations.size(), static_cast<std::size_t>(test::world_size()));
  std::vector<int> received(static_cast<std::size_t>(test::world_size()), 0);
  for (int r = 0; r < test::world_size(); ++r) {
    const auto& to = placement.destinations[static_cast<std::size_t>(r)];
    ASSERT_EQ(to.size(), 1U);
    EXPECT_NE(fake_node_of(to[0]), fake_node_of(r)) << "rank " << r << "'s copy stays on its node";
    ++received[static_cast<std::size_t>(to[0])];
  }
  for (int r = 0; r < test::world_size(); ++r)
    EXPECT_EQ(placement.sources[static_cast<std::size_t>(r)].size(), static_cast<std::size_t>(received[r])) << r;
}

TEST(LocalTierPlacement, GroupsFromAVariableKeepCopiesOutOfTheGroup) {
  test::TempDir dir;
  const detail::Comm comm(MPI_COMM_WORLD);
  const ScopedVariable fake(detail::kNodeNameVariable, fake_node_of(test::world_rank()));
  // node-c and node-b share a rack; node-a (at 3 ranks and more) has its own.
  const ScopedVariable racks("H5DCP_TEST_RACKS", "node-c=rack1, node-b=rack1, node-a=rack2");
  auto options = tier_options(dir.path());
  options.groups_variable = "H5DCP_TEST_RACKS";
  if (fake_node_count() < 3) {
    // Every node in one rack: no copy may leave it.
    EXPECT_THROW(detail::survey_local_tier(comm, options), UsageError);
    return;
  }
  const auto placement = detail::survey_local_tier(comm, options);
  EXPECT_EQ(describe(placement), rank0_text(describe(placement)));
  ASSERT_EQ(placement.nodes, (std::vector<std::string>{"node-a", "node-b", "node-c"}));
  EXPECT_EQ(placement.partners[1], std::vector<int>{0});  // node-b -> node-a
  EXPECT_EQ(placement.partners[2], std::vector<int>{0});  // node-c -> node-a
  ASSERT_EQ(placement.partners[0].size(), 1U);            // node-a -> node-b or node-c
  EXPECT_EQ(placement.groups[static_cast<std::size_t>(placement.partners[0][0])], "rack1");
}

TEST(LocalTierPlacement, TheGroupsVariableMustBeSetAndTheSameOnEveryRank) {
  test::TempDir dir;
  const detail::Comm comm(MPI_COMM_WORLD);
  const ScopedVariable fake(detail::kNodeNameVariable, fake_node_of(test::world_rank()));
  auto options = tier_options(dir.path());
  options.groups_variable = "H5DCP_TEST_RACKS";
  {
    const ScopedVariable unset("H5DCP_TEST_RACKS", std::nullopt);
    try {
      detail::survey_local_tier(comm, options);
      ADD_FAILURE() << "an unset groups variable passed";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("H5DCP_TEST_RACKS, which is not set"), std::string::npos) << e.what();
    }
  }
  if (test::world_size() < 2) return;
  const ScopedVariable racks("H5DCP_TEST_RACKS", test::world_rank() == 0 ? "node-c=r1" : "node-c=r2");
  try {
    detail::survey_local_tier(comm, options);
    ADD_FAILURE() << "ranks with different groups passed";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("H5DCP_TEST_RACKS"), std::string::npos) << e.what();
  }
}

TEST(LocalTierOptions, TheManagerChecksAndKeepsThemWithoutUsingThem) {
  test::TempDir dir;
  auto options = tier_options(dir.path());
  options.replicas = 2;
  options.every_steps = 2;
  options.drain_every_steps = 10;
  options.run_id = "job-1";
  {
    CheckpointManager manager(dir.file("run"), {}, MPI_COMM_WORLD, ManagerOptions{0, options});
    ASSERT_TRUE(manager.options().local.has_value());
    EXPECT_EQ(manager.options().local->directory, options.directory);
    EXPECT_EQ(manager.options().local->replicas, 2);
    EXPECT_EQ(manager.options().local->drain_every_steps, 10);
    EXPECT_EQ(manager.options().local->run_id, "job-1");
    // Not used yet: saving is as without a tier, nothing local is written.
    manager.save(1, StateDict{{"t", test::reference_tensor({4}, at::kFloat)}, {"x", std::int64_t{1}}});
    EXPECT_EQ(manager.steps(), std::vector<std::int64_t>{1});
  }
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"run"}));
  auto invalid = options;
  invalid.keep = 0;
  EXPECT_THROW(CheckpointManager(dir.file("run"), {}, MPI_COMM_WORLD, ManagerOptions{0, invalid}), UsageError);
  if (test::world_size() < 2) return;
  auto differing = options;
  differing.keep = 2 + test::world_rank() % 2;
  try {
    CheckpointManager manager(dir.file("run"), {}, MPI_COMM_WORLD, ManagerOptions{0, differing});
    ADD_FAILURE() << "ranks with different local tiers passed";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("local.keep"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace h5dcp
