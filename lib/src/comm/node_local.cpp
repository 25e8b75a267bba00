// The MPI side of rank -> device mapping: a rank's place on its node, and
// the exchange of every rank's one-line description.

#include <unistd.h>

#include <climits>
#include <string>

#include "comm/comm.hpp"
#include "h5dcp/device.hpp"

namespace h5dcp {
namespace {

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = "";
  if (::gethostname(name, sizeof name) != 0) return "unknown";
  name[HOST_NAME_MAX] = '\0';
  return name;
}

// Frees a communicator MPI_Comm_split_type made, on every path.
class OwnedComm {
 public:
  OwnedComm() = default;
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;
  ~OwnedComm() {
    if (comm_ != MPI_COMM_NULL && detail::mpi_is_active()) MPI_Comm_free(&comm_);
  }
  MPI_Comm* out() { return &comm_; }
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace

NodeLocalRank node_local_rank(MPI_Comm comm) {
  NodeLocalRank local;
  if (!detail::mpi_is_active()) {
    local.node = host_name();
    return local;
  }
  // Our own duplicate: MPI errors come back as codes (IoError), not aborts.
  const detail::Comm dup(comm);
  char name[MPI_MAX_PROCESSOR_NAME] = "";
  int length = 0;
  detail::check_mpi(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
  local.node.assign(name, static_cast<std::size_t>(length));
  // Keyed by rank: local ranks follow the order of the ranks on the node.
  OwnedComm node;
  detail::check_mpi(MPI_Comm_split_type(dup.raw(), MPI_COMM_TYPE_SHARED, dup.rank(), MPI_INFO_NULL, node.out()),
                    "MPI_Comm_split_type");
  detail::check_mpi(MPI_Comm_rank(node.get(), &local.rank), "MPI_Comm_rank");
  detail::check_mpi(MPI_Comm_size(node.get(), &local.size), "MPI_Comm_size");
  return local;
}

std::vector<std::string> gather_device_descriptions(const DeviceAssignment& assignment, MPI_Comm comm) {
  const detail::Comm dup(comm);
  auto lines = dup.gather(assignment.description);
  if (!dup.is_coordinator()) lines.clear();
  return lines;
}

}  // namespace h5dcp
