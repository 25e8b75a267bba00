#pragma once
// Which node each rank runs on, for the node-local tier (issue 50): this
// rank's node name and every rank's, gathered to every rank. The names
// are MPI_Get_processor_name's (the host name without MPI), the same that
// node_placement (plain_calls.hpp) reports for the training library's rank
// -> device mapping; only the tier's survey honours the override below.

#include <string>
#include <vector>

#include "comm/comm.hpp"

namespace h5dcp::detail {

/// The environment variable that overrides this rank's node name in the
/// survey, when set and not empty: tests fake several nodes on one machine
/// with it (ranks of one node must all set the same name).
inline constexpr const char* kNodeNameVariable = "H5DCP_NODE_NAME";

/// This process's node as MPI names it (MPI_Get_processor_name), or the host
/// name without MPI. Not collective; no override.
std::string processor_name();

/// This rank's node for the local tier: kNodeNameVariable when set and not
/// empty, else processor_name(). Not collective.
std::string survey_node_name();

/// Every rank's survey_node_name(), in rank order, on every rank. Collective
/// over `comm` (one exception-robust step, "node-survey", with its
/// deadline); throws CheckpointError on every rank, naming each rank whose
/// name is empty or holds a '/' or a control character (node names become
/// parts of file names).
std::vector<std::string> survey_nodes(const Comm& comm);

}  // namespace h5dcp::detail
