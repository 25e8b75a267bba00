#pragma once
// Checked MPI calls on a caller's communicator, for the layers above that
// need one fact or one plain transfer and no Comm (which duplicates the
// communicator and is collective to build). Every call here throws IoError
// naming the MPI call when MPI reports an error. Without MPI initialized (or
// with MPI_COMM_NULL) the process is rank 0 of 1 and transfers are no-ops.

#include <mpi.h>

#include <cstddef>
#include <string>

namespace h5dcp::detail {

/// The rank of this process in `comm`. Not collective.
int rank_of(MPI_Comm comm);
/// The number of ranks in `comm`. Not collective.
int size_of(MPI_Comm comm);

/// Root's `bytes` bytes at `data` into every rank's `data`, in pieces of at
/// most 1 GiB (MPI counts are ints; every rank cuts the same pieces).
/// Collective over `comm`; on `comm` itself, so callers keep its order.
void broadcast_raw_bytes(void* data, std::size_t bytes, int root, MPI_Comm comm);

/// Throws UsageError unless MPI was initialized with MPI_THREAD_MULTIPLE
/// (or is not initialized at all); `what` names the feature that needs it.
/// Not collective.
void require_thread_multiple(const std::string& what);

/// Where this rank runs: its rank among the processes of `comm` on its node,
/// their number and the node's name.
struct NodePlacement {
  int rank = 0;
  int size = 1;
  std::string node;
};

/// This rank's NodePlacement (the MPI calls of the training library's
/// node_local_rank: MPI_Comm_split_type on a duplicate of `comm`).
/// Collective over `comm` when MPI is active.
NodePlacement node_placement(MPI_Comm comm);

}  // namespace h5dcp::detail
