#pragma once
// Rank -> GPU mapping: which device a rank should train on.
//
// The decision is a pure function, choose_device(), of the node-local rank,
// the number of CUDA devices LibTorch sees and the environment; it does no
// I/O, so it can be checked with made-up inputs. assign_device() gathers the
// real inputs (the node-local rank from MPI, LibTorch's device count, the
// process environment) and adds a one-line description programs print at
// start:
//
//   rank 3 (node n1, local 1 of 2) -> cuda:1 (CUDA_VISIBLE_DEVICES=2,3: GPU 3)
//   rank 0 (node n1, local 0 of 4) -> cpu (no GPU)
//
// The rule, in order:
// 1. Local rank: MPI's node-local rank (MPI_Comm_split_type with
//    MPI_COMM_TYPE_SHARED) when known; otherwise the launcher's variable:
//    OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID (MPICH),
//    MV2_COMM_WORLD_LOCAL_RANK, PALS_LOCAL_RANKID; otherwise 0 of 1.
// 2. No device visible to LibTorch -> CPU (the reason says why when the
//    environment hints at GPUs: CUDA_VISIBLE_DEVICES hiding them, or Slurm
//    assigning GPUs that a CPU-only LibTorch cannot use).
// 3. Otherwise the candidates are LibTorch's devices 0..n-1. LibTorch already
//    honours CUDA_VISIBLE_DEVICES (its device i is the i-th listed GPU). When
//    CUDA_VISIBLE_DEVICES is not set but Slurm names the GPUs of this step
//    (SLURM_STEP_GPUS, else SLURM_JOB_GPUS, else GPU_DEVICE_ORDINAL) and the
//    process sees more GPUs than that (no cgroup confinement), only Slurm's
//    GPUs are candidates: a job never lands on a GPU given to another job.
// 4. device = candidates[local rank % number of candidates]. More local ranks
//    than candidates share devices round-robin (the description says so).

#include <mpi.h>

#include <map>
#include <string>
#include <vector>

namespace h5dcp {

/// Environment variables by name (the relevant subset is enough).
using Environment = std::map<std::string, std::string>;

/// The device chosen for one rank, and why.
struct DeviceChoice {
  /// The node-local rank and size the choice used; `local_size` is 0 when
  /// unknown (a local rank taken from a launcher variable without a size).
  int local_rank = 0;
  int local_size = 1;
  /// Where the local rank came from: "MPI", a variable name, or "default".
  std::string local_rank_source = "default";
  /// LibTorch's CUDA device index; -1 for the CPU.
  int cuda_index = -1;
  /// Local ranks on this device, this one included (0 when unknown).
  /// choose_device counts them assuming every local rank sees the same
  /// devices; assign_device counts the ranks of the node that really chose
  /// the same GPU (so per-task CUDA_VISIBLE_DEVICES, where every rank sees
  /// one different GPU as cuda:0, shares nothing).
  int ranks_sharing = 1;
  /// The GPU's name in the environment that listed it (a CUDA_VISIBLE_DEVICES
  /// entry: an index, a UUID or a MIG id; or a Slurm GPU id); empty when
  /// nothing names it.
  std::string gpu;
  /// What decided: "CUDA_VISIBLE_DEVICES=2,3", "SLURM_STEP_GPUS=1,3 (LibTorch
  /// sees 4 GPUs)", "4 GPUs visible", "no GPU", ...
  std::string reason;

  bool is_cuda() const noexcept { return cuda_index >= 0; }
  /// "cuda:<index>" or "cpu": what torch::Device / c10::Device parse.
  std::string device() const;
  /// device() with the reason: "cuda:1 (CUDA_VISIBLE_DEVICES=2,3: GPU 3)",
  /// "cpu (no GPU)".
  std::string summary() const;
};

/// The device for a rank (the rule above). `local_rank` < 0 means unknown
/// (then the environment decides); `local_size` is ignored when `local_rank`
/// is unknown. `device_count` is what LibTorch reports
/// (torch::cuda::device_count()). Pure: no I/O, not collective. Throws
/// UsageError when `device_count` < 0, or `local_rank` >= `local_size` for a
/// known local rank.
DeviceChoice choose_device(int local_rank, int local_size, int device_count, const Environment& env);

/// This process's environment (every variable). Not collective.
Environment current_environment();

/// This rank's place on its node.
struct NodeLocalRank {
  int rank = 0;      ///< rank among the processes of `comm` on this node
  int size = 1;      ///< processes of `comm` on this node
  std::string node;  ///< the node's name (MPI_Get_processor_name / hostname)
};

/// The node-local rank and size within `comm` (MPI_Comm_split_type with
/// MPI_COMM_TYPE_SHARED; ranks keep their order). Collective over `comm`.
/// Without MPI initialized: 0 of 1 with the host name. Throws IoError when an
/// MPI call fails.
NodeLocalRank node_local_rank(MPI_Comm comm = MPI_COMM_WORLD);

/// A rank's device with the inputs that chose it.
struct DeviceAssignment {
  int rank = 0;  ///< rank in the communicator
  int size = 1;
  std::string node;
  int device_count = 0;  ///< CUDA devices LibTorch sees
  DeviceChoice choice;
  /// One line: "rank 3 (node n1, local 1 of 2) -> cuda:1 (CUDA_VISIBLE_DEVICES=2,3: GPU 3)".
  std::string description;
};

/// The device this rank should use: the node-local rank in `comm` (the
/// communicator of every process using this node's GPUs; MPI_COMM_WORLD by
/// default), LibTorch's CUDA device count (0 with a CPU-only LibTorch) and
/// this process's environment, through choose_device(). It only decides: it
/// does not set LibTorch's current device. Collective over `comm` (without
/// MPI initialized, a single process whose local rank comes from the
/// environment). Throws IoError when an MPI call fails, UsageError as
/// choose_device(). For tests on machines without a GPU:
/// H5DCP_TEST_CUDA_DEVICE_COUNT=N (1-64), where LibTorch sees no GPU, adds to
/// `description` the device this rank would take with N GPUs ("[... would be
/// cuda:1 (CUDA_VISIBLE_DEVICES=0,1: GPU 1)]"); `choice` stays the CPU.
/// Ignored where LibTorch sees a GPU.
DeviceAssignment assign_device(MPI_Comm comm = MPI_COMM_WORLD);

/// Every rank's `assignment.description`, in rank order, on rank 0 of `comm`
/// (empty elsewhere): rank 0 prints them. Collective over `comm`; without MPI,
/// this process's line. Throws IoError when an MPI call fails.
std::vector<std::string> gather_device_descriptions(const DeviceAssignment& assignment, MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace h5dcp
