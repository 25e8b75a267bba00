// The node survey of the local tier (see node_survey.hpp).

#include "comm/node_survey.hpp"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <string>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = "";
  if (::gethostname(name, sizeof name) != 0) return "unknown";
  name[HOST_NAME_MAX] = '\0';
  return name;
}

bool usable_node_name(const std::string& name) {
  return !name.empty() && std::none_of(name.begin(), name.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return c == '/' || u < 0x20 || u == 0x7f;
  });
}

}  // namespace

std::string processor_name() {
  if (!mpi_is_active()) return host_name();
  char name[MPI_MAX_PROCESSOR_NAME] = "";
  int length = 0;
  check_mpi(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
  return std::string(name, static_cast<std::size_t>(std::max(length, 0)));
}

std::string survey_node_name() {
  if (const char* value = std::getenv(kNodeNameVariable); value != nullptr && *value != '\0') return value;
  return processor_name();
}

std::vector<std::string> survey_nodes(const Comm& comm) {
  return comm.all_gather("node-survey", [] {
    const char* variable = std::getenv(kNodeNameVariable);
    const bool overridden = variable != nullptr && *variable != '\0';
    auto name = survey_node_name();
    if (!usable_node_name(name))
      throw UsageError("h5dcp: this rank's node name '" + name + "' (from " +
                       (overridden ? std::string(kNodeNameVariable) : std::string("MPI_Get_processor_name")) +
                       ") cannot name a node's local checkpoints: it is empty or holds '/' or a control character");
    return name;
  });
}

}  // namespace h5dcp::detail
