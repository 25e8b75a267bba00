#include "plan/replica_placement.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <set>

#include "base/joined.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

std::size_t at(int index) { return static_cast<std::size_t>(index); }

// The node indices in an order that interleaves the groups: round robin over
// the groups (the largest first, then by name), each group's nodes by name.
std::vector<int> interleaved_order(const std::vector<std::string>& groups) {
  std::map<std::string, std::vector<int>> members;
  for (std::size_t n = 0; n < groups.size(); ++n) members[groups[n]].push_back(static_cast<int>(n));
  std::vector<const std::vector<int>*> by_size;
  by_size.reserve(members.size());
  for (const auto& [group, nodes] : members) by_size.push_back(&nodes);
  std::stable_sort(by_size.begin(), by_size.end(), [](const auto* a, const auto* b) { return a->size() > b->size(); });
  std::vector<int> order;
  for (std::size_t round = 0; order.size() < groups.size(); ++round) {
    for (const auto* nodes : by_size) {
      if (round < nodes->size()) order.push_back((*nodes)[round]);
    }
  }
  return order;
}

}  // namespace

ReplicaPlacement place_replicas(const std::vector<std::string>& rank_nodes,
                                const std::map<std::string, std::string>& node_groups, int replicas) {
  if (rank_nodes.empty()) throw UsageError("replica placement: the saving job has no ranks");
  if (replicas < 0) {
    throw UsageError("replica placement: the number of replicas must be >= 0, not " + std::to_string(replicas));
  }
  if (rank_nodes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    throw UsageError("replica placement: too many ranks");
  }
  ReplicaPlacement p;
  p.replicas = replicas;
  const std::set<std::string> names(rank_nodes.begin(), rank_nodes.end());
  if (names.count("") != 0) {
    const auto rank = std::find(rank_nodes.begin(), rank_nodes.end(), "") - rank_nodes.begin();
    throw UsageError("replica placement: rank " + std::to_string(rank) + " has an empty node name");
  }
  p.nodes.assign(names.begin(), names.end());
  const auto node_count = p.nodes.size();
  for (const auto& node : p.nodes) {
    if (node_groups.empty()) {
      p.groups.push_back(node);
      continue;
    }
    const auto group = node_groups.find(node);
    if (group == node_groups.end()) {
      throw UsageError("replica placement: node " + node +
                       " has no failure-domain group (every node of the job needs one when groups are given)");
    }
    p.groups.push_back(group->second);
  }
  const std::set<std::string> group_names(p.groups.begin(), p.groups.end());
  if (at(replicas) >= node_count) {
    throw UsageError("replica placement: " + std::to_string(replicas) + " replicas on other nodes need at least " +
                     std::to_string(replicas + 1) + " nodes; the job has " + std::to_string(node_count) + " (" +
                     joined(p.nodes) + ")");
  }
  if (at(replicas) >= group_names.size()) {
    throw UsageError("replica placement: " + std::to_string(replicas) +
                     " replicas outside each node's failure-domain group need at least " +
                     std::to_string(replicas + 1) + " groups; the job's " + std::to_string(node_count) +
                     " nodes are in " + std::to_string(group_names.size()) + " (" +
                     joined({group_names.begin(), group_names.end()}) + ")");
  }

  p.node_ranks.resize(node_count);
  p.node_of_rank.resize(rank_nodes.size());
  p.local_index.resize(rank_nodes.size());
  for (std::size_t r = 0; r < rank_nodes.size(); ++r) {
    const auto node =
        static_cast<int>(std::lower_bound(p.nodes.begin(), p.nodes.end(), rank_nodes[r]) - p.nodes.begin());
    p.node_of_rank[r] = node;
    p.local_index[r] = static_cast<int>(p.node_ranks[at(node)].size());
    p.node_ranks[at(node)].push_back(static_cast<int>(r));
  }

  const auto order = interleaved_order(p.groups);
  std::vector<int> held(node_count, 0);
  p.partners.assign(node_count, {});
  for (int k = 0; k < replicas; ++k) {
    for (std::size_t i = 0; i < node_count; ++i) {
      const auto node = order[i];
      std::set<std::string> taken{p.groups[at(node)]};
      for (const auto partner : p.partners[at(node)]) taken.insert(p.groups[at(partner)]);
      int best = -1;
      for (std::size_t d = 1; d < node_count; ++d) {
        const auto candidate = order[(i + d) % node_count];
        if (taken.count(p.groups[at(candidate)]) != 0) continue;
        if (best < 0 || held[at(candidate)] < held[at(best)]) best = candidate;
      }
      // There are replicas + 1 groups, so some group is still free.
      p.partners[at(node)].push_back(best);
      ++held[at(best)];
    }
  }

  p.destinations.assign(rank_nodes.size(), {});
  p.sources.assign(rank_nodes.size(), {});
  for (std::size_t r = 0; r < rank_nodes.size(); ++r) {
    for (int k = 0; k < replicas; ++k) {
      const auto& ranks = p.node_ranks[at(p.partners[at(p.node_of_rank[r])][at(k)])];
      const auto destination = ranks[at(p.local_index[r]) % ranks.size()];
      p.destinations[r].push_back(destination);
      p.sources[at(destination)].push_back({static_cast<int>(r), k});
    }
  }
  return p;
}

}  // namespace h5dcp::detail
