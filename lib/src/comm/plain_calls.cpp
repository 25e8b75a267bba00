// Checked MPI calls on a caller's communicator (see plain_calls.hpp): the
// facts and plain transfers the layers above need without a Comm.

#include "comm/plain_calls.hpp"

#include <algorithm>
#include <string>

#include "comm/comm.hpp"
#include "comm/node_survey.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

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

int rank_of(MPI_Comm comm) {
  int rank = 0;
  if (comm != MPI_COMM_NULL && mpi_is_active()) check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  return rank;
}

int size_of(MPI_Comm comm) {
  int size = 1;
  if (comm != MPI_COMM_NULL && mpi_is_active()) check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  return size;
}

void broadcast_raw_bytes(void* data, std::size_t bytes, int root, MPI_Comm comm) {
  if (comm == MPI_COMM_NULL || !mpi_is_active()) return;
  constexpr std::size_t kPiece = std::size_t{1} << 30;
  auto* p = static_cast<char*>(data);
  for (std::size_t done = 0; done < bytes;) {
    const auto n = std::min(kPiece, bytes - done);
    check_mpi(MPI_Bcast(p + done, static_cast<int>(n), MPI_BYTE, root, comm), "MPI_Bcast");
    done += n;
  }
}

void require_thread_multiple(const std::string& what) {
  if (!mpi_is_active()) return;
  int provided = MPI_THREAD_SINGLE;
  check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
  if (provided < MPI_THREAD_MULTIPLE)
    throw UsageError("h5dcp: " + what +
                     " need MPI_THREAD_MULTIPLE (a background thread uses MPI while the "
                     "caller does): initialize MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)");
}

NodePlacement node_placement(MPI_Comm comm) {
  NodePlacement local;
  local.node = processor_name();
  if (!mpi_is_active()) return local;
  // Our own duplicate: MPI errors come back as codes (IoError), not aborts.
  const Comm dup(comm);
  // Keyed by rank: local ranks follow the order of the ranks on the node.
  OwnedComm node;
  check_mpi(MPI_Comm_split_type(dup.raw(), MPI_COMM_TYPE_SHARED, dup.rank(), MPI_INFO_NULL, node.out()),
            "MPI_Comm_split_type");
  check_mpi(MPI_Comm_rank(node.get(), &local.rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(node.get(), &local.size), "MPI_Comm_size");
  return local;
}

}  // namespace h5dcp::detail
