// The node-local tier's start at 1-4 ranks (issue 50): the node survey
// (H5DCP_NODE_NAME fakes 1-3 nodes on one machine), every rank computing the
// same replica placement from it, the groups of an environment variable, and
// the manager checking its LocalTierOptions, and local saves: every node's
// own and partner copies, bit for bit, and a failed step leaving the last.

#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/local_save.hpp"
#include "comm/comm.hpp"
#include "comm/node_survey.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/checkpoint_manager.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/verify.hpp"
#include "hdf5/attributes.hpp"
#include "hdf5/container_reader.hpp"
#include "hdf5/local_file.hpp"
#include "manager/local_tier.hpp"
#include "storage/checkpoint_directory.hpp"
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

// tier_options with a copy of each node's data on another node where the
// ranks fake two or more, for run `run_id`.
LocalTierOptions replicated_tier_options(const std::string& directory, std::string run_id) {
  auto o = tier_options(directory);
  o.replicas = fake_node_count() >= 2 ? 1 : 0;
  o.run_id = std::move(run_id);
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

TEST(LocalTierOptions, TheManagerChecksAndKeepsThem) {
  test::TempDir dir;
  auto options = tier_options(dir.path());
  options.replicas = 0;  // one real node: no other node to copy to
  options.every_steps = 2;
  options.drain_every_steps = 10;
  options.run_id = "job-1";
  {
    CheckpointManager manager(dir.file("run"), {}, MPI_COMM_WORLD, ManagerOptions{0, options});
    ASSERT_TRUE(manager.options().local.has_value());
    EXPECT_EQ(manager.options().local->directory, options.directory);
    EXPECT_EQ(manager.options().local->every_steps, 2);
    EXPECT_EQ(manager.options().local->drain_every_steps, 10);
    EXPECT_EQ(manager.options().local->run_id, "job-1");
    // Step 1 is not a local step: it goes to the shared directory only.
    manager.save(1, StateDict{{"t", test::reference_tensor({4}, at::kFloat)}, {"x", std::int64_t{1}}});
    EXPECT_EQ(manager.steps(), std::vector<std::int64_t>{1});
    EXPECT_FALSE(manager.latest_local().has_value());
  }
  auto invalid = options;
  invalid.keep = 0;
  EXPECT_THROW(CheckpointManager(dir.file("run"), {}, MPI_COMM_WORLD, ManagerOptions{0, invalid}), UsageError);
  // More copies than other nodes (one real node): as many as fit, none here,
  // and the local steps are still written.
  auto too_many = options;
  too_many.replicas = 1;
  {
    CheckpointManager manager(dir.file("run"), {}, MPI_COMM_WORLD, ManagerOptions{0, too_many});
    manager.save(2, StateDict{{"t", test::reference_tensor({4}, at::kFloat)}, {"x", std::int64_t{2}}});
    EXPECT_EQ(manager.latest_local(), std::optional<std::int64_t>(2));
  }
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

TEST(LocalTierOptions, ADirectorySharedByTwoNodesIsRefused) {
  if (fake_node_count() < 2) GTEST_SKIP() << "needs two ranks (two faked nodes)";
  ScopedVariable node("H5DCP_NODE_NAME", fake_node_of(test::world_rank()));
  test::TempDir dir;
  const auto root = rank0_text(dir.path());
  LocalTierOptions options;
  options.directory = root + "/local";  // no '{node}', and every faked node sees it
  options.run_id = "run-S";
  const auto error = test::expect_checkpoint_error([&] {
    CheckpointManager manager(root + "/shared", {}, MPI_COMM_WORLD, ManagerOptions{0, options});
  });
  EXPECT_EQ(error.step(), "checkpoint-manager:local-check");
  EXPECT_NE(std::string(error.what()).find("each node needs a directory of its own"), std::string::npos)
      << error.what();
  MPI_Barrier(MPI_COMM_WORLD);
  // A directory per node: accepted, each with its own node's mark.
  options.directory = root + "/local-{node}";
  {
    CheckpointManager manager(root + "/shared", {}, MPI_COMM_WORLD, ManagerOptions{0, options});
    MPI_Barrier(MPI_COMM_WORLD);
    const auto node_dir = detail::local_directory_for(options.directory, fake_node_of(test::world_rank()));
    EXPECT_EQ(detail::read_pointer(node_dir, ".h5dcp-node-" + fake_node_of(test::world_rank())),
              std::optional<std::string>(fake_node_of(test::world_rank())));
    EXPECT_TRUE(
        detail::nodes_sharing_directory(node_dir, fake_node_of(test::world_rank()), {"node-a", "node-b", "node-c"})
            .empty());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// The state every test of saving uses at `step`: a tensor in row blocks
// (one per rank), a replicated one and a counter.
at::Tensor full_weights() { return test::reference_tensor({8, 6}, at::kFloat, 7); }
StateDict tier_state(std::int64_t step) {
  return StateDict{
      {"w", test::grid_shards(full_weights(), test::world_size(), 1, test::world_rank(), test::world_size())},
      {"b", test::reference_tensor({5}, at::kDouble, 3)},
      {"step", step}};
}

// The blocks of `owner` in the copy at `path` read back as tier_state's,
// bit for bit. (h5dcp::load refuses a copy as a whole: the other owners'
// blocks are holes in it.)
void expect_owners_blocks(const std::string& path, int owner) {
  const auto shards = test::grid_shards(full_weights(), test::world_size(), 1, owner, test::world_size());
  detail::ContainerReader reader(path, MPI_COMM_NULL);
  for (const auto& shard : shards.local_shards()) {
    auto got = at::empty_like(shard.tensor);
    const std::vector<std::int64_t> sizes(shard.tensor.sizes().begin(), shard.tensor.sizes().end());
    reader.read("w", DType::Float32, ChunkStorageMetadata{shard.offsets, sizes}, got.data_ptr());
    EXPECT_TRUE(test::bitwise_equal(got, shard.tensor)) << path;
  }
  reader.close();
}

// A broadcast of rank 0's directory, so every rank checks the same one.
std::string shared_temp_path(const test::TempDir& dir) { return rank0_text(dir.path()); }

// The local step directories in `node_dir`, by name.
std::vector<std::string> step_entries(const std::string& node_dir) {
  std::vector<std::string> out;
  for (const auto& name : detail::list_names(node_dir))
    if (name.rfind("local-step-", 0) == 0 || name.find(".partial") != std::string::npos) out.push_back(name);
  return out;
}

TEST(LocalTierSave, EveryNodeHoldsItsOwnAndItsPartnersCopiesBitForBit) {
  ScopedVariable node("H5DCP_NODE_NAME", fake_node_of(test::world_rank()));
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  auto options = replicated_tier_options(root, "run-A");
  options.drain_every_steps = 2;
  options.keep = 2;
  {
    CheckpointManager manager(root + "/shared", {}, MPI_COMM_WORLD, ManagerOptions{0, options});
    for (std::int64_t step = 1; step <= 3; ++step) manager.save(step, tier_state(step));
    EXPECT_EQ(manager.latest_local(), std::optional<std::int64_t>(3));
    EXPECT_EQ(manager.steps(), std::vector<std::int64_t>{2}) << "only the drain step reaches the shared directory";
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const auto my_node = fake_node_of(test::world_rank());
  const auto node_dir = detail::local_directory_for(options.directory, my_node);
  EXPECT_EQ(step_entries(node_dir), (std::vector<std::string>{"local-step-00000002", "local-step-00000003"}));
  EXPECT_EQ(detail::read_pointer(node_dir, "latest-local"), std::optional<std::string>("local-step-00000003"));
  // Nodes by name; node i's partner is node i + 1 (one replica, no groups):
  // this node holds its own ranks' copies and those of the node before it.
  std::vector<std::string> names;
  for (int r = 0; r < test::world_size(); ++r) names.push_back(fake_node_of(r));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  const auto mine = static_cast<std::size_t>(std::find(names.begin(), names.end(), my_node) - names.begin());
  const auto before = names[(mine + names.size() - 1) % names.size()];
  std::vector<std::string> expected;
  for (int r = 0; r < test::world_size(); ++r)
    if (fake_node_of(r) == my_node || (options.replicas == 1 && fake_node_of(r) == before))
      expected.push_back(detail::local_copy_name(r));
  std::sort(expected.begin(), expected.end());
  const auto step_dir = node_dir + "/local-step-00000003";
  ASSERT_EQ(detail::list_names(step_dir), expected);
  for (const auto& name : expected) {
    const auto path = step_dir + "/" + name;
    const auto id = detail::read_local_identity(path);
    EXPECT_EQ(id.run_id, "run-A");
    EXPECT_EQ(id.step, 3);
    EXPECT_EQ(id.replica, fake_node_of(id.owner_rank) == my_node ? 0 : 1) << path;
    EXPECT_EQ(static_cast<int>(id.rank_node.size()), test::world_size());
    EXPECT_EQ(id.nodes, names);
    expect_owners_blocks(path, id.owner_rank);
    // Its index and chunk owners, read from one open: 'w' has a chunk per
    // rank, each owned by the rank whose rows it is.
    const auto copy = detail::read_local_copy_index(path, test::world_size());
    const auto& w = std::get<TensorStorageMetadata>(copy.index.metadata.state_dict_metadata.at("w"));
    const auto& owners = copy.owners.at("w");
    ASSERT_EQ(owners.size(), w.chunks.size()) << path;
    ASSERT_EQ(static_cast<int>(owners.size()), test::world_size()) << path;
    for (std::size_t k = 0; k < owners.size(); ++k) {
      const auto rows =
          test::grid_shards(full_weights(), test::world_size(), 1, static_cast<int>(owners[k]), test::world_size());
      EXPECT_EQ(w.chunks[k].offsets, rows.local_shards().at(0).offsets) << path << ", chunk " << k;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0's directory outlives every rank's reads
}

// A copy's owner rank and replica are int64 in the file: checked as stored,
// not after narrowing to int, where 2^32 + r read as rank r.
TEST(LocalFileIdentity, AnOwnerRankOrReplicaBeyondAnIntIsRefusedNotWrapped) {
  ScopedVariable node("H5DCP_NODE_NAME", fake_node_of(test::world_rank()));
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  auto options = tier_options(root);
  options.run_id = "run-W";
  {
    CheckpointManager manager(root + "/shared", {}, MPI_COMM_WORLD, ManagerOptions{0, options});
    manager.save(1, tier_state(1));
  }
  const int rank = test::world_rank();
  const auto copy = detail::local_directory_for(options.directory, fake_node_of(rank)) + "/local-step-00000001/" +
                    detail::local_copy_name(rank);
  ASSERT_EQ(detail::read_local_identity(copy).owner_rank, rank);
  ASSERT_EQ(detail::read_local_identity(copy).replica, 0);
  for (const auto& [attribute, stored] :
       {std::pair<std::string, std::int64_t>{"h5dcp.local.owner_rank", rank}, {"h5dcp.local.replica", 0}}) {
    const auto edited = copy + ".edited";
    std::filesystem::copy_file(copy, edited, std::filesystem::copy_options::overwrite_existing);
    {
      const hid_t file = H5Fopen(edited.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      ASSERT_GE(file, 0);
      detail::overwrite_int64_attribute(file, attribute, {(std::int64_t{1} << 32) + stored});
      ASSERT_GE(H5Fclose(file), 0);
    }
    try {
      (void)detail::read_local_identity(edited);
      ADD_FAILURE() << attribute << " = 2^32 + " << stored << " was read as " << stored;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string((std::int64_t{1} << 32) + stored)), std::string::npos)
          << e.what();
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0's directory outlives every rank's reads
}

TEST(LocalTierSave, AFailureInTheCopyFailsTheStepOnEveryRankAndKeepsThePreviousOne) {
  if (test::world_size() < 2) GTEST_SKIP() << "needs two ranks (two faked nodes)";
  ScopedVariable node("H5DCP_NODE_NAME", fake_node_of(test::world_rank()));
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  auto options = tier_options(root);
  options.run_id = "run-B";
  CheckpointManager manager(root + "/shared", {}, MPI_COMM_WORLD, ManagerOptions{0, options});
  manager.save(1, tier_state(1));
  const int failing = test::world_size() - 1;
  {
    ScopedVariable fault("H5DCP_INJECT_FAULT", "local:write@" + std::to_string(failing));
    const auto error = test::expect_checkpoint_error([&] { manager.save(2, tier_state(2)); });
    EXPECT_EQ(error.step(), "local:write");
    EXPECT_TRUE(error.failures().count(failing)) << error.what();
  }
  EXPECT_EQ(manager.latest_local(), std::optional<std::int64_t>(1));
  MPI_Barrier(MPI_COMM_WORLD);
  const auto node_dir = detail::local_directory_for(options.directory, fake_node_of(test::world_rank()));
  EXPECT_EQ(step_entries(node_dir), std::vector<std::string>{"local-step-00000001"}) << "no partial step is left";
  EXPECT_EQ(detail::read_pointer(node_dir, "latest-local"), std::optional<std::string>("local-step-00000001"));
  MPI_Barrier(MPI_COMM_WORLD);  // the checks above before a node leader starts step 3
  // The manager goes on: the next step publishes.
  manager.save(3, tier_state(3));
  EXPECT_EQ(manager.latest_local(), std::optional<std::int64_t>(3));
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(LocalTierSave, APartnerThatStallsInTheCopyFailsTheStepWithinTheDeadline) {
  if (test::world_size() < 2) GTEST_SKIP() << "needs two ranks (two faked nodes)";
  ScopedVariable node("H5DCP_NODE_NAME", fake_node_of(test::world_rank()));
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  auto options = tier_options(root);
  options.run_id = "run-D";
  CheckpointManager manager(root + "/shared", {}, MPI_COMM_WORLD, ManagerOptions{0, options});
  manager.save(1, tier_state(1));
  const int stalled = test::world_size() - 1;
  SaveOptions save_options;
  save_options.timeout_seconds = 2 * test::time_scale();
  {
    ScopedVariable fault("H5DCP_INJECT_FAULT",
                         "local:copy@" + std::to_string(stalled) + "~" + std::to_string(6 * test::time_scale()));
    const auto started = std::chrono::steady_clock::now();
    const auto error = test::expect_checkpoint_error([&] { manager.save(2, tier_state(2), save_options); });
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (test::world_rank() != stalled) {
      EXPECT_TRUE(error.failures().count(stalled)) << error.what();
      EXPECT_LT(seconds, 6 * test::time_scale()) << "the others waited for the stalled rank";
    }
  }
  EXPECT_EQ(manager.latest_local(), std::optional<std::int64_t>(1));
  MPI_Barrier(MPI_COMM_WORLD);
  const auto node_dir = detail::local_directory_for(options.directory, fake_node_of(test::world_rank()));
  EXPECT_EQ(step_entries(node_dir), std::vector<std::string>{"local-step-00000001"});
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(LocalTierSave, AnAsyncSaveReturnsOnceStagedAndPublishesInTheBackground) {
  ScopedVariable node("H5DCP_NODE_NAME", fake_node_of(test::world_rank()));
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  const auto options = replicated_tier_options(root, "run-E");
  CheckpointManager manager(root + "/shared", {}, MPI_COMM_WORLD, ManagerOptions{0, options});
  auto w = test::grid_shards(full_weights(), test::world_size(), 1, test::world_rank(), test::world_size());
  const StateDict state{{"w", w}, {"b", test::reference_tensor({5}, at::kDouble, 3)}, {"step", std::int64_t{1}}};
  const auto saved = manager.async_save(1, state);
  // The caller changes its tensors as soon as the call returns: the copy
  // must hold what they were.
  for (const auto& shard : w.local_shards()) shard.tensor.fill_(-1.0F);
  EXPECT_EQ(manager.in_flight(), std::optional<std::int64_t>(1));
  const auto result = manager.wait();
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(saved.valid());
  EXPECT_EQ(manager.latest_local(), std::optional<std::int64_t>(1));
  EXPECT_FALSE(manager.in_flight().has_value());
  EXPECT_TRUE(manager.steps().empty()) << "a local step alone reaches no shared file";
  MPI_Barrier(MPI_COMM_WORLD);
  const auto node_dir = detail::local_directory_for(options.directory, fake_node_of(test::world_rank()));
  EXPECT_EQ(detail::read_pointer(node_dir, "latest-local"), std::optional<std::string>("local-step-00000001"));
  expect_owners_blocks(node_dir + "/local-step-00000001/" + detail::local_copy_name(test::world_rank()),
                       test::world_rank());
  MPI_Barrier(MPI_COMM_WORLD);
  // A failure in the background is thrown by the next wait(), on every
  // rank, and leaves the last step.
  if (test::world_size() >= 2) {
    const int failing = test::world_size() - 1;
    ScopedVariable fault("H5DCP_INJECT_FAULT", "local:write@" + std::to_string(failing));
    manager.async_save(2, tier_state(2));
    const auto error = test::expect_checkpoint_error([&] { manager.wait(); });
    EXPECT_EQ(error.step(), "local:write");
    EXPECT_TRUE(error.failures().count(failing)) << error.what();
    EXPECT_EQ(manager.latest_local(), std::optional<std::int64_t>(1));
    MPI_Barrier(MPI_COMM_WORLD);
    EXPECT_EQ(step_entries(node_dir), std::vector<std::string>{"local-step-00000001"}) << "no partial step is left";
    MPI_Barrier(MPI_COMM_WORLD);
  }
  // Staged before async_stage_and_save returns; the next save waits for it.
  const auto handles = manager.async_stage_and_save(3, tier_state(3));
  EXPECT_EQ(handles.staged.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  manager.save(4, tier_state(4));
  EXPECT_EQ(handles.saved.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  EXPECT_EQ(manager.latest_local(), std::optional<std::int64_t>(4));
  MPI_Barrier(MPI_COMM_WORLD);
  // Step 1, beyond the two kept, is the next step's spare (hidden).
  EXPECT_EQ(step_entries(node_dir),
            (std::vector<std::string>{".local-step-00000001.partial", "local-step-00000003", "local-step-00000004"}));
  MPI_Barrier(MPI_COMM_WORLD);
  // The step the tier holds, saved again for the shared directory (as after
  // a preemption): the shared file is written, the local step is not.
  struct stat before {};
  ASSERT_EQ(::stat((node_dir + "/local-step-00000004").c_str(), &before), 0);
  manager.save(4, tier_state(4), {}, SaveTarget::Shared);
  EXPECT_EQ(manager.steps(), std::vector<std::int64_t>{4});
  struct stat after {};
  ASSERT_EQ(::stat((node_dir + "/local-step-00000004").c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino) << "local step 4 was written again";
  MPI_Barrier(MPI_COMM_WORLD);
}

// A state every byte of which depends on the step (a stale block would
// show), with one more tensor from step `wider_from` on (another layout).
StateDict changing_state(std::int64_t step, std::int64_t wider_from) {
  StateDict state{{"w", test::grid_shards(full_weights() + static_cast<float>(step), test::world_size(), 1,
                                          test::world_rank(), test::world_size())},
                  {"b", test::reference_tensor({5}, at::kDouble, 3) * static_cast<double>(step)},
                  {"step", step}};
  if (step >= wider_from) state.emplace("extra", test::reference_tensor({3, 2}, at::kInt, step));
  return state;
}

// The size and inode of the file at `path`.
std::pair<std::int64_t, std::uint64_t> size_and_inode(const std::string& path) {
  struct stat info {};
  EXPECT_EQ(::stat(path.c_str(), &info), 0) << path;
  return {info.st_size, info.st_ino};
}

TEST(LocalTierSave, EachStepWritesOverTheCopiesOfTheStepBeyondTheKeptOnes) {
  ScopedVariable node("H5DCP_NODE_NAME", fake_node_of(test::world_rank()));
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  auto options = replicated_tier_options(root, "run-R");
  options.keep = 2;
  const std::int64_t wider_from = 7;  // steps 7 on: another layout, whose first copies are made anew
  const auto node_dir = detail::local_directory_for(options.directory, fake_node_of(test::world_rank()));
  const auto copy_of = [&](std::int64_t step) {
    return node_dir + "/" + detail::local_step_name(step) + "/" + detail::local_copy_name(test::world_rank());
  };
  std::map<std::int64_t, std::pair<std::int64_t, std::uint64_t>> seen;  // step -> its own copy's size and inode
  std::map<std::int64_t, std::string> created;  // step -> its own copy's h5dcp.created (to the second)
  {
    CheckpointManager manager(root + "/shared", {}, MPI_COMM_WORLD, ManagerOptions{0, options});
    for (std::int64_t step = 1; step <= 12; ++step) {
      if (step % 2 == 0) {
        manager.async_save(step, changing_state(step, wider_from));
        manager.wait();
      } else {
        manager.save(step, changing_state(step, wider_from));
      }
      MPI_Barrier(MPI_COMM_WORLD);
      seen[step] = size_and_inode(copy_of(step));
      created[step] = detail::read_container_index(copy_of(step)).metadata.created;
      // Each copy holds its step, verifies, and its owner's blocks are the step's.
      const auto report = verify_checkpoint(copy_of(step));
      EXPECT_TRUE(report.ok()) << copy_of(step) << ": " << (report.ok() ? "" : report.problems[0].message);
      ASSERT_TRUE(report.local_copy.has_value());
      EXPECT_EQ(report.local_copy->step, step);
      EXPECT_EQ(report.local_copy->owner_rank, test::world_rank());
      EXPECT_EQ(report.local_copy->replica, 0);
      // 'w' has a chunk per rank, 'b' and 'extra' one each: every chunk has
      // one owner, whose copy holds it, and the CLI's summary says the same.
      EXPECT_EQ(report.local_copy->chunks_total, test::world_size() + (step >= wider_from ? 2 : 1));
      std::int64_t held_everywhere = 0;
      MPI_Allreduce(&report.local_copy->chunks_held, &held_everywhere, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
      EXPECT_EQ(held_everywhere, report.local_copy->chunks_total);
      const auto summary = read_local_copy_summary(copy_of(step));
      ASSERT_TRUE(summary.has_value());
      EXPECT_EQ(summary->chunks_held, report.local_copy->chunks_held);
      EXPECT_EQ(summary->run_id, report.local_copy->run_id);
      detail::ContainerReader reader(copy_of(step), MPI_COMM_NULL);
      const auto state = changing_state(step, wider_from);
      for (const auto& shard : std::get<ShardedTensor>(state.at("w")).local_shards()) {
        auto got = at::empty_like(shard.tensor);
        const std::vector<std::int64_t> sizes(shard.tensor.sizes().begin(), shard.tensor.sizes().end());
        reader.read("w", DType::Float32, ChunkStorageMetadata{shard.offsets, sizes}, got.data_ptr());
        EXPECT_TRUE(test::bitwise_equal(got, shard.tensor)) << "step " << step;
      }
      reader.close();
      if (step >= 3) {  // the step beyond the two kept is the next one's spare, hidden
        EXPECT_EQ(step_entries(node_dir),
                  (std::vector<std::string>{"." + detail::local_step_name(step - 2) + ".partial",
                                            detail::local_step_name(step - 1), detail::local_step_name(step)}));
      }
      if (step >= 4) {
        // The spare's directory, renamed: its files are this step's.
        EXPECT_EQ(seen[step].second, seen[step - 3].second)
            << "step " << step << " is not step " << step - 3 << "'s file";
        const bool same_layout = step - 3 >= wider_from || step < wider_from;
        // Written over in place, a copy keeps the time it was made (steps 4
        // and 10 are saved a second after steps 1 and 7); made anew after
        // the layout changed, it has its own.
        if (step == 4 || step == 10) {
          EXPECT_EQ(created[step], created[step - 3]) << "not written in place";
        }
        if (step == wider_from) {
          EXPECT_NE(created[step], created[step - 3]) << "written in place across layouts";
        }
        // Written over again and again, a copy does not grow.
        if (same_layout) {
          EXPECT_EQ(seen[step].first, seen[step - 3].first);
        }
      }
      // The next step's save time differs from its spare's by a second.
      if (step == 3 || step == wider_from + 2) std::this_thread::sleep_for(std::chrono::milliseconds(1100));
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  EXPECT_EQ(step_entries(node_dir), (std::vector<std::string>{"local-step-00000011", "local-step-00000012"}))
      << "the manager's end removes its spare";
  MPI_Barrier(MPI_COMM_WORLD);
  // A new job recovers step 12 from the tier, bit for bit.
  CheckpointManager manager(root + "/shared", {}, MPI_COMM_WORLD, ManagerOptions{0, options});
  const auto expected = changing_state(12, wider_from);
  StateDict state{{"w", test::zeros_like(std::get<ShardedTensor>(expected.at("w")))},
                  {"b", at::zeros({5}, at::kDouble)},
                  {"extra", at::zeros({3, 2}, at::kInt)},
                  {"step", std::int64_t{-1}}};
  const auto info = manager.load(state);
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->step, 12);
  EXPECT_EQ(manager.last_scan().local.step, std::optional<std::int64_t>(12));
  EXPECT_TRUE(manager.last_scan().local.skipped.empty());
  for (std::size_t i = 0; i < std::get<ShardedTensor>(state.at("w")).local_shards().size(); ++i)
    EXPECT_TRUE(test::bitwise_equal(std::get<ShardedTensor>(state.at("w")).local_shards()[i].tensor,
                                    std::get<ShardedTensor>(expected.at("w")).local_shards()[i].tensor));
  EXPECT_TRUE(test::bitwise_equal(std::get<at::Tensor>(state.at("b")), std::get<at::Tensor>(expected.at("b"))));
  EXPECT_TRUE(test::bitwise_equal(std::get<at::Tensor>(state.at("extra")), std::get<at::Tensor>(expected.at("extra"))));
  EXPECT_EQ(std::get<std::int64_t>(state.at("step")), 12);
  MPI_Barrier(MPI_COMM_WORLD);
}

// --- recovery ---------------------------------------------------------------

// Saves steps 1-3 with the usual fake nodes: local steps 2 and 3 on every
// node, shared step 2 only.
LocalTierOptions save_three_steps(const std::string& root, const std::string& run_id) {
  ScopedVariable node("H5DCP_NODE_NAME", fake_node_of(test::world_rank()));
  auto options = tier_options(root);
  options.replicas = 1;
  options.drain_every_steps = 2;
  options.run_id = run_id;
  CheckpointManager manager(root + "/shared", {}, MPI_COMM_WORLD, ManagerOptions{0, options});
  for (std::int64_t step = 1; step <= 3; ++step) manager.save(step, tier_state(step));
  return options;
}

// A node's death: its local directory goes with it (rank 0 removes it).
void lose_node(const LocalTierOptions& options, const std::string& node) {
  MPI_Barrier(MPI_COMM_WORLD);  // every rank's manager is gone (the node's first rank removes its spare)
  if (test::world_rank() == 0) std::filesystem::remove_all(detail::local_directory_for(options.directory, node));
  MPI_Barrier(MPI_COMM_WORLD);
}

// What a recovering job of `ranks` ranks (the first ones of the world), on
// the nodes `node_of` names, loads with `options`: the state in a sharding
// of its own (row blocks over its ranks), and the manager's answer. Ranks
// outside the job return nullopt.
struct Recovered {
  std::optional<CheckpointInfo> info;
  StateDict state;
  CheckpointScan scan;
};
std::optional<Recovered> recover(const std::string& root, const LocalTierOptions& options, int ranks,
                                 const std::function<std::string(int)>& node_of) {
  MPI_Comm job = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, test::world_rank() < ranks ? 0 : MPI_UNDEFINED, test::world_rank(), &job);
  if (job == MPI_COMM_NULL) return std::nullopt;
  int rank = 0;
  MPI_Comm_rank(job, &rank);
  Recovered out;
  {
    ScopedVariable node("H5DCP_NODE_NAME", node_of(rank));
    CheckpointManager manager(root + "/shared", {}, job, ManagerOptions{0, options});
    out.state = StateDict{{"w", test::zeros_like(test::grid_shards(full_weights(), ranks, 1, rank, ranks))},
                          {"b", at::zeros({5}, at::kDouble)},
                          {"step", std::int64_t{-1}}};
    out.info = manager.load(out.state);
    out.scan = manager.last_scan();
  }
  MPI_Comm_free(&job);
  return out;
}

// The state of step `step` reads back bit for bit in the recovering job's
// sharding (`ranks` ranks, this one `rank`).
void expect_step_state(const Recovered& got, std::int64_t step, int rank, int ranks) {
  const auto expected = test::grid_shards(full_weights(), ranks, 1, rank, ranks);
  const auto& shards = std::get<ShardedTensor>(got.state.at("w")).local_shards();
  ASSERT_EQ(shards.size(), expected.local_shards().size());
  for (std::size_t i = 0; i < shards.size(); ++i)
    EXPECT_TRUE(test::bitwise_equal(shards[i].tensor, expected.local_shards()[i].tensor)) << "rank " << rank;
  EXPECT_TRUE(
      test::bitwise_equal(std::get<at::Tensor>(got.state.at("b")), test::reference_tensor({5}, at::kDouble, 3)));
  EXPECT_EQ(std::get<std::int64_t>(got.state.at("step")), step);
}

// The survivors of `lost` among the saving job's nodes, by name, and a node
// that never held anything.
std::vector<std::string> survivors_and_a_fresh_node(const std::string& lost) {
  std::vector<std::string> nodes;
  for (int r = 0; r < test::world_size(); ++r)
    if (fake_node_of(r) != lost && std::find(nodes.begin(), nodes.end(), fake_node_of(r)) == nodes.end())
      nodes.push_back(fake_node_of(r));
  nodes.push_back("node-z");
  return nodes;
}

TEST(LocalTierRecovery, ALostNodesBlocksComeFromItsReplicaOntoAnotherRankCount) {
  if (test::world_size() < 2) GTEST_SKIP() << "needs two ranks (two faked nodes)";
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  const auto options = save_three_steps(root, "run-R");
  lose_node(options, fake_node_of(0));
  // The shared checkpoint is made unreadable: a recovery that read a byte of
  // it would fail.
  if (test::world_rank() == 0) std::filesystem::resize_file(root + "/shared/step-00000002.h5", 0);
  MPI_Barrier(MPI_COMM_WORLD);
  // Fewer ranks when there are enough (4 -> 3, 3 -> 2), on the surviving
  // nodes and a fresh one, ranks spread round robin over them.
  const int ranks = test::world_size() >= 3 ? test::world_size() - 1 : test::world_size();
  const auto nodes = survivors_and_a_fresh_node(fake_node_of(0));
  const auto got =
      recover(root, options, ranks, [&](int r) { return nodes[static_cast<std::size_t>(r) % nodes.size()]; });
  if (got) {
    ASSERT_TRUE(got->info.has_value());
    EXPECT_TRUE(got->info->local);
    EXPECT_EQ(got->info->step, 3);
    EXPECT_EQ(got->scan.local.step, std::optional<std::int64_t>(3));
    // Every saved byte (w: 8 x 6 float32, b: 5 float64) is read at least
    // once: in place by a rank on its copy's node, or whole by the rank that
    // serves it to another node. A byte of w is needed by one rank, so it is
    // read at most twice (its part in place, its chunk by a server); b, which
    // every rank needs, at most once per rank and once by a server.
    const std::int64_t w_bytes = 8 * 6 * 4;
    const std::int64_t b_bytes = 5 * 8;
    EXPECT_GE(got->scan.local.bytes_read, w_bytes + b_bytes);
    EXPECT_LE(got->scan.local.bytes_read, 2 * w_bytes + (ranks + 1) * b_bytes);
    // A rank on the fresh node holds no copy: what it needs arrives over MPI.
    if (static_cast<std::size_t>(ranks) >= nodes.size()) {
      EXPECT_GT(got->scan.local.bytes_sent, 0);
    }
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    expect_step_state(*got, 3, rank, ranks);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(LocalTierRecovery, WithoutACopyOfEveryRankItFallsBackToTheSharedCheckpointAndSaysWhy) {
  if (test::world_size() < 3) GTEST_SKIP() << "needs three faked nodes";
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  const auto options = save_three_steps(root, "run-S");
  // Two of three nodes lost with one replica: some rank's blocks are gone.
  lose_node(options, "node-a");
  lose_node(options, "node-b");
  const auto got = recover(root, options, test::world_size(),
                           [](int r) { return r % 2 == 0 ? std::string("node-c") : std::string("node-z"); });
  ASSERT_TRUE(got && got->info.has_value());
  EXPECT_FALSE(got->info->local);
  EXPECT_EQ(got->info->step, 2);
  EXPECT_FALSE(got->scan.local.step.has_value());
  ASSERT_FALSE(got->scan.local.rejected.empty());
  EXPECT_NE(got->scan.local.rejected.front().find("3"), std::string::npos) << got->scan.local.rejected.front();
  expect_step_state(*got, 2, test::world_rank(), test::world_size());
  MPI_Barrier(MPI_COMM_WORLD);
}

// Flips one bit in the middle of rank 0's block of 'w' of step 3 in the
// copy at `path` (found by its bytes): the file otherwise intact, so only
// the checksums tell.
void flip_rank0_block_bit(const std::string& path) {
  const auto block = test::grid_shards(full_weights(), test::world_size(), 1, 0, test::world_size())
                         .local_shards()
                         .at(0)
                         .tensor.contiguous();
  const std::string needle(static_cast<const char*>(block.data_ptr()),
                           static_cast<std::size_t>(block.numel()) * block.element_size());
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const auto at = bytes.find(needle);
  // Fails the test but returns from this helper only: the caller's rank
  // goes on to the barriers with the others (a test returning on one rank
  // would leave them waiting), and the test's own checks fail after.
  ASSERT_NE(at, std::string::npos) << "rank 0's block is not in " << path;
  bytes[at + needle.size() / 2] = static_cast<char>(bytes[at + needle.size() / 2] ^ 0x01);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(LocalTierRecovery, ACorruptedCopyIsSkippedByNameAndItsReplicaUsed) {
  if (test::world_size() < 2) GTEST_SKIP() << "needs two ranks (two faked nodes)";
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  const auto options = save_three_steps(root, "run-C");
  // Rank 0's own copy of step 3: one byte of its block of 'w' flipped (found
  // by its bytes), the file otherwise intact, so only the checksums tell.
  const auto damaged = detail::local_directory_for(options.directory, fake_node_of(0)) + "/local-step-00000003/" +
                       detail::local_copy_name(0);
  if (test::world_rank() == 0) flip_rank0_block_bit(damaged);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto got = recover(root, options, test::world_size(), [](int r) { return fake_node_of(r); });
  ASSERT_TRUE(got && got->info.has_value());
  EXPECT_TRUE(got->info->local);
  EXPECT_EQ(got->info->step, 3);
  ASSERT_EQ(got->scan.local.skipped.size(), 1u);
  EXPECT_NE(got->scan.local.skipped[0].find(damaged), std::string::npos) << got->scan.local.skipped[0];
  EXPECT_NE(got->scan.local.skipped[0].find("checksum"), std::string::npos) << got->scan.local.skipped[0];
  expect_step_state(*got, 3, test::world_rank(), test::world_size());
  MPI_Barrier(MPI_COMM_WORLD);
}

// A copy whose index lost a tensor's checksums cannot be verified: the
// survey judges it (no block of it is read, in place or served), names it,
// and the recovery takes its replica. The recovering job has the nodes in
// reverse, so that rank 0's rows, whose own copy is on node-c, would be
// served to it from there over MPI (a served block once went unverified
// when its copy had no checksums).
TEST(LocalTierRecovery, ACopyWithoutChecksumsIsSkippedByNameAndItsReplicaUsed) {
  if (test::world_size() < 2) GTEST_SKIP() << "needs two ranks (two faked nodes)";
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  const auto options = save_three_steps(root, "run-S");
  const auto stripped = detail::local_directory_for(options.directory, fake_node_of(0)) + "/local-step-00000003/" +
                        detail::local_copy_name(0);
  if (test::world_rank() == 0) {
    // EXPECT, not ASSERT: rank 0 goes on to the barrier with the others.
    const hid_t file = H5Fopen(stripped.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t w = H5Dopen2(file, "/w", H5P_DEFAULT);
    EXPECT_GE(H5Adelete(w, "h5dcp.checksums"), 0);
    EXPECT_GE(H5Adelete(w, "h5dcp.checksum_rows"), 0);
    EXPECT_GE(H5Dclose(w), 0);
    EXPECT_GE(H5Fclose(file), 0);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const auto got =
      recover(root, options, test::world_size(), [](int r) { return fake_node_of(test::world_size() - 1 - r); });
  ASSERT_TRUE(got && got->info.has_value());
  EXPECT_TRUE(got->info->local);
  EXPECT_EQ(got->info->step, 3);
  ASSERT_EQ(got->scan.local.skipped.size(), 1u);
  EXPECT_NE(got->scan.local.skipped[0].find(stripped), std::string::npos) << got->scan.local.skipped[0];
  EXPECT_NE(got->scan.local.skipped[0].find("holds no checksums for 'w'"), std::string::npos)
      << got->scan.local.skipped[0];
  expect_step_state(*got, 3, test::world_rank(), test::world_size());
  MPI_Barrier(MPI_COMM_WORLD);
}

// The copies of rank 0's data of `steps` on the three faked nodes that exist.
std::vector<std::string> rank0_copies(const LocalTierOptions& options, std::initializer_list<const char*> steps) {
  std::vector<std::string> copies;
  for (const auto* step : steps)
    for (const auto* node : {"node-a", "node-b", "node-c"}) {
      const auto path =
          detail::local_directory_for(options.directory, node) + "/" + step + "/" + detail::local_copy_name(0);
      if (std::filesystem::exists(path)) copies.push_back(path);
    }
  return copies;
}

// Every copy of rank 0's data of step 3 damaged in its blocks, which only
// the load reads (the survey reads identities and indexes): the load finds
// the first, then the replica, loads nothing from either, and falls back to
// the shared step 2, naming both copies and why step 3 was passed over.
TEST(LocalTierRecovery, BlocksDamagedInEveryCopyOfARankFallBackToTheSharedCheckpoint) {
  if (test::world_size() < 2) GTEST_SKIP() << "needs two ranks (two faked nodes)";
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  const auto options = save_three_steps(root, "run-D");
  const auto copies = rank0_copies(options, {"local-step-00000003"});
  ASSERT_EQ(copies.size(), 2u) << "rank 0's own copy and its one replica";
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::world_rank() == 0)
    for (const auto& path : copies) flip_rank0_block_bit(path);
  MPI_Barrier(MPI_COMM_WORLD);
  const auto got = recover(root, options, test::world_size(), [](int r) { return fake_node_of(r); });
  ASSERT_TRUE(got && got->info.has_value());
  EXPECT_FALSE(got->info->local);
  EXPECT_EQ(got->info->step, 2);
  EXPECT_FALSE(got->scan.local.step.has_value());
  ASSERT_EQ(got->scan.local.skipped.size(), 2u);
  for (const auto& path : copies) {
    const bool named = std::any_of(got->scan.local.skipped.begin(), got->scan.local.skipped.end(),
                                   [&](const std::string& line) { return line.find(path) != std::string::npos; });
    EXPECT_TRUE(named) << path << " is not named as skipped";
  }
  for (const auto& line : got->scan.local.skipped) EXPECT_NE(line.find("checksum"), std::string::npos) << line;
  ASSERT_EQ(got->scan.local.rejected.size(), 1u);
  EXPECT_NE(got->scan.local.rejected[0].find("step 3"), std::string::npos) << got->scan.local.rejected[0];
  expect_step_state(*got, 2, test::world_rank(), test::world_size());
  MPI_Barrier(MPI_COMM_WORLD);
}

// A copy on a rank's own node is read straight into its blocks: when that
// read finds it damaged, parts of the state are written already. With no
// other step and no shared checkpoint to write every key again, the load
// throws on every rank rather than report that there was nothing to resume.
TEST(LocalTierRecovery, ADamagedCopyReadInPlaceWithNothingToFallBackToThrowsOnEveryRank) {
  if (test::world_size() < 2) GTEST_SKIP() << "needs two ranks (two faked nodes)";
  test::TempDir dir;
  const auto root = shared_temp_path(dir);
  const auto options = save_three_steps(root, "run-T");
  const auto copies = rank0_copies(options, {"local-step-00000002", "local-step-00000003"});
  ASSERT_EQ(copies.size(), 4u) << "rank 0's own copy and its one replica, of steps 2 and 3";
  MPI_Barrier(MPI_COMM_WORLD);
  if (test::world_rank() == 0) {
    for (const auto& path : copies) flip_rank0_block_bit(path);
    std::filesystem::remove(root + "/shared/step-00000002.h5");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  // The same nodes: rank 0's own copy is on its node, so it reads it in place.
  std::string message;
  try {
    (void)recover(root, options, test::world_size(), [](int r) { return fake_node_of(r); });
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("partly written"), std::string::npos) << "rank " << test::world_rank() << ": " << message;
  EXPECT_NE(message.find("checksum mismatch"), std::string::npos) << message;
  MPI_Barrier(MPI_COMM_WORLD);
}
}  // namespace
}  // namespace h5dcp
