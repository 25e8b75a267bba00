#pragma once
// Where the copies of a node-local checkpoint go (issue 50): every node's
// data is copied to `replicas` other nodes, its partners, chosen so that a
// loss of up to `replicas` nodes (or, when the user groups nodes into
// failure domains such as racks, of up to `replicas` whole groups) leaves
// at least one copy of every node's data. Pure: every rank computes the
// same placement from the same node names, whatever order the ranks found
// them in.
//
// The partners: the nodes in an order that interleaves the groups (round
// robin over the groups, largest first, each group's nodes by name), and
// for each replica k = 0, 1, ... each node in that order takes the allowed
// node that holds the fewest copies so far, the nearest after it in the
// order on a tie. Allowed: not the node itself, not in its group, not in
// the group of one of its partners so far. Without groups this is the
// shift by k + 1 over the nodes by name, every node holding exactly
// `replicas` copies.

#include <map>
#include <string>
#include <vector>

namespace h5dcp::detail {

/// Replica `replica` (0-based) of rank `rank`'s data.
struct ReplicaSource {
  int rank = 0;
  int replica = 0;
};

/// The copies of a save: which node holds which node's data, and which
/// rank sends its data to which rank.
struct ReplicaPlacement {
  int replicas = 0;                                 ///< copies of every rank's data on other nodes
  std::vector<std::string> nodes;                   ///< the saving job's nodes, by name (the node index order)
  std::vector<std::string> groups;                  ///< each node's failure-domain group (its own name without groups)
  std::vector<std::vector<int>> node_ranks;         ///< each node's ranks, ascending
  std::vector<int> node_of_rank;                    ///< each rank's node (an index into `nodes`)
  std::vector<int> local_index;                     ///< each rank's index among its node's ranks
  std::vector<std::vector<int>> partners;           ///< each node's `replicas` partner nodes, replica 0 first
  std::vector<std::vector<int>> destinations;       ///< each rank's `replicas` destination ranks, replica 0 first
  std::vector<std::vector<ReplicaSource>> sources;  ///< what each rank receives, by source rank then replica
};

/// The placement of `replicas` copies (>= 0) of every rank's data, from the
/// node of every rank (`rank_nodes[rank]`, the names MPI_Get_processor_name
/// or Slurm give) and the failure-domain group of each node
/// (`node_groups`; empty: every node its own group; otherwise every node of
/// the job must have one, entries for other nodes are ignored). Rank r's
/// replica k goes to the rank of partner node partners[node][k] whose local
/// index is r's local index modulo that node's rank count. Throws
/// UsageError when there are no ranks, a node name is empty, a node has no
/// group, `replicas` is negative, or there are not `replicas` + 1 nodes
/// (groups) to place the copies on.
ReplicaPlacement place_replicas(const std::vector<std::string>& rank_nodes,
                                const std::map<std::string, std::string>& node_groups, int replicas);

}  // namespace h5dcp::detail
