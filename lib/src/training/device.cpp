// Rank -> device with its real inputs: the node-local rank (comm's
// node_placement), LibTorch's CUDA device count and the environment, fed to
// choose_device (device_choice.cpp); and the line apps print.

#include <torch/cuda.h>  // declarations only; a CPU-only LibTorch reports 0 devices

#include <algorithm>
#include <string>
#include <utility>

#include "comm/comm.hpp"
#include "comm/plain_calls.hpp"
#include "h5dcp/training/device.hpp"
#include "training/device_simulation.hpp"

namespace h5dcp {

NodeLocalRank node_local_rank(MPI_Comm comm) {
  auto placement = detail::node_placement(comm);
  return {placement.rank, placement.size, std::move(placement.node)};
}

std::vector<std::string> gather_device_descriptions(const DeviceAssignment& assignment, MPI_Comm comm) {
  const detail::Comm dup(comm);
  auto lines = dup.gather(assignment.description);
  if (!dup.is_coordinator()) lines.clear();
  return lines;
}

DeviceAssignment assign_device(MPI_Comm comm) {
  DeviceAssignment assignment;
  const bool mpi = detail::mpi_is_active();
  const auto local = node_local_rank(comm);
  assignment.rank = detail::rank_of(comm);  // 0 of 1 without MPI
  assignment.size = detail::size_of(comm);
  assignment.node = local.node;
  // A c10::DeviceIndex (signed char) that is never negative.
  assignment.device_count = static_cast<int>(static_cast<unsigned char>(torch::cuda::device_count()));
  // Without MPI the launcher's variables (srun, mpiexec without MPI_Init)
  // know the local rank better than a single process can.
  const auto env = current_environment();
  const auto choose = [&](int device_count) {
    return mpi ? choose_device(local.rank, local.size, device_count, env) : choose_device(-1, 0, device_count, env);
  };
  assignment.choice = choose(assignment.device_count);
  if (mpi) {
    // Count the ranks of this node on the same GPU: by its name where the
    // environment names it (ranks may see different GPUs as the same index).
    // Every rank takes part, whatever it chose.
    const auto& c = assignment.choice;
    const auto key = local.node + '\n' + (c.gpu.empty() ? c.device() : "gpu " + c.gpu);
    const auto keys = detail::Comm(comm).all_gather(key);
    if (c.is_cuda()) assignment.choice.ranks_sharing = static_cast<int>(std::count(keys.begin(), keys.end(), key));
  }
  const auto& choice = assignment.choice;
  // Tests without a GPU (H5DCP_TEST_CUDA_DEVICE_COUNT): the line also names
  // the device this rank would take with that many GPUs; it still runs on
  // the device chosen above.
  std::string simulated;
  if (const auto count = detail::simulated_device_count(assignment.device_count, env)) {
    const auto would = choose(*count);
    simulated = " [" + std::string(detail::kTestDeviceCountVariable) + "=" + std::to_string(*count) + ": would be " +
                would.summary() + "]";
  }
  const std::string size = choice.local_size > 0 ? std::to_string(choice.local_size) : "?";
  std::string where = "node " + assignment.node + ", local " + std::to_string(choice.local_rank) + " of " + size;
  if (choice.local_rank_source != "MPI" && choice.local_rank_source != "default")
    where += " from " + choice.local_rank_source;
  assignment.description =
      "rank " + std::to_string(assignment.rank) + " (" + where + ") -> " + choice.summary() + simulated;
  return assignment;
}

}  // namespace h5dcp
