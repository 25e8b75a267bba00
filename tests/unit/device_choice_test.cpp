// Rank -> device: the pure decision, with made-up device counts and
// environments (mpiexec, Slurm with and without GPU binding, CPU-only).

#include <gtest/gtest.h>

#include "h5dcp/error.hpp"
#include "h5dcp/training/device.hpp"
#include "training/device_simulation.hpp"

namespace h5dcp {
namespace {

TEST(ChooseDevice, NoGpuMeansCpu) {
  const auto c = choose_device(1, 2, 0, {});
  EXPECT_FALSE(c.is_cuda());
  EXPECT_EQ(c.cuda_index, -1);
  EXPECT_EQ(c.device(), "cpu");
  EXPECT_EQ(c.summary(), "cpu (no GPU)");
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_size, 2);
  EXPECT_EQ(c.local_rank_source, "MPI");
}

// H5DCP_TEST_CUDA_DEVICE_COUNT: a count where LibTorch sees no GPU, and
// only then; anything but a count from 1 to 64 is ignored.
TEST(SimulatedDeviceCount, OnlyACountAndOnlyWithoutARealGpu) {
  const Environment two{{"H5DCP_TEST_CUDA_DEVICE_COUNT", "2"}};
  EXPECT_EQ(detail::simulated_device_count(0, two), 2);
  EXPECT_EQ(detail::simulated_device_count(1, two), std::nullopt);
  EXPECT_EQ(detail::simulated_device_count(0, {}), std::nullopt);
  for (const char* bad : {"", "0", "65", "-1", "2 ", "two", "1e1"})
    EXPECT_EQ(detail::simulated_device_count(0, {{"H5DCP_TEST_CUDA_DEVICE_COUNT", bad}}), std::nullopt) << bad;
  EXPECT_EQ(detail::simulated_device_count(0, {{"H5DCP_TEST_CUDA_DEVICE_COUNT", "64"}}), 64);
  // What the line then shows for local rank 1 of 2 given GPUs 0,1 by Slurm.
  EXPECT_EQ(choose_device(1, 2, 2, {{"CUDA_VISIBLE_DEVICES", "0,1"}}).summary(),
            "cuda:1 (CUDA_VISIBLE_DEVICES=0,1: GPU 1)");
}

TEST(ChooseDevice, CpuSaysWhyWhenTheEnvironmentHintsAtGpus) {
  EXPECT_EQ(choose_device(0, 1, 0, {{"CUDA_VISIBLE_DEVICES", ""}}).summary(),
            "cpu (no GPU visible with CUDA_VISIBLE_DEVICES='')");
  EXPECT_EQ(choose_device(0, 1, 0, {{"CUDA_VISIBLE_DEVICES", "-1"}}).summary(),
            "cpu (no GPU visible with CUDA_VISIBLE_DEVICES='-1')");
  EXPECT_EQ(choose_device(0, 1, 0, {{"SLURM_STEP_GPUS", "0,1"}}).summary(),
            "cpu (no GPU visible to LibTorch although SLURM_STEP_GPUS=0,1 assigns GPUs: is LibTorch built without "
            "CUDA?)");
}

TEST(ChooseDevice, OneRankPerGpuWithMpiexec) {
  for (int local = 0; local < 4; ++local) {
    const auto c = choose_device(local, 4, 4, {});
    EXPECT_EQ(c.cuda_index, local);
    EXPECT_EQ(c.ranks_sharing, 1);
    EXPECT_EQ(c.gpu, "");
    EXPECT_EQ(c.summary(), "cuda:" + std::to_string(local) + " (4 GPUs visible)");
  }
  EXPECT_EQ(choose_device(0, 1, 1, {}).summary(), "cuda:0 (1 GPU visible)");
}

TEST(ChooseDevice, MoreRanksThanGpusShareRoundRobin) {
  // 4 ranks on 2 GPUs: 0,2 -> cuda:0 and 1,3 -> cuda:1.
  EXPECT_EQ(choose_device(2, 4, 2, {}).cuda_index, 0);
  EXPECT_EQ(choose_device(3, 4, 2, {}).summary(), "cuda:1 (2 GPUs visible; shared by 2 local ranks)");
  // 3 ranks on 2 GPUs: cuda:0 has ranks 0 and 2, cuda:1 only rank 1.
  EXPECT_EQ(choose_device(0, 3, 2, {}).ranks_sharing, 2);
  EXPECT_EQ(choose_device(2, 3, 2, {}).ranks_sharing, 2);
  EXPECT_EQ(choose_device(1, 3, 2, {}).ranks_sharing, 1);
  // Fewer ranks than GPUs: the first ones are used.
  EXPECT_EQ(choose_device(1, 2, 8, {}).cuda_index, 1);
}

TEST(ChooseDevice, CudaVisibleDevicesNamesThePhysicalGpu) {
  const Environment env{{"CUDA_VISIBLE_DEVICES", "2,3"}};
  const auto c = choose_device(1, 2, 2, env);
  EXPECT_EQ(c.cuda_index, 1);  // LibTorch numbers the visible GPUs 0..n-1
  EXPECT_EQ(c.gpu, "3");
  EXPECT_EQ(c.summary(), "cuda:1 (CUDA_VISIBLE_DEVICES=2,3: GPU 3)");
  EXPECT_EQ(choose_device(0, 2, 2, env).summary(), "cuda:0 (CUDA_VISIBLE_DEVICES=2,3: GPU 2)");
  // UUIDs and MIG ids are names too.
  EXPECT_EQ(choose_device(1, 2, 2, {{"CUDA_VISIBLE_DEVICES", "GPU-5e1f,MIG-77aa"}}).gpu, "MIG-77aa");
  // CUDA stops at an invalid entry; LibTorch then reports fewer devices.
  const auto truncated = choose_device(1, 2, 1, {{"CUDA_VISIBLE_DEVICES", "4,oops,5"}});
  EXPECT_EQ(truncated.cuda_index, 0);
  EXPECT_EQ(truncated.gpu, "4");
  EXPECT_EQ(truncated.ranks_sharing, 2);
}

TEST(ChooseDevice, SlurmPerTaskBindingGivesEachRankItsOnlyGpu) {
  // srun --gpus-per-task=1: every task sees one GPU, its own, as cuda:0.
  const auto c =
      choose_device(3, 4, 1, {{"CUDA_VISIBLE_DEVICES", "3"}, {"SLURM_STEP_GPUS", "0,1,2,3"}, {"SLURM_LOCALID", "3"}});
  EXPECT_EQ(c.cuda_index, 0);
  EXPECT_EQ(c.gpu, "3");
  EXPECT_EQ(c.reason, "CUDA_VISIBLE_DEVICES=3");  // CUDA_VISIBLE_DEVICES wins over Slurm's list
}

TEST(ChooseDevice, SlurmGpusRestrictAWholeNodeView) {
  // No CUDA_VISIBLE_DEVICES and no cgroup: the process sees all 4 GPUs but
  // the step got GPUs 1 and 3; only those are used.
  const Environment env{{"SLURM_STEP_GPUS", "1,3"}, {"SLURM_JOB_GPUS", "0,1,2,3"}};
  const auto first = choose_device(0, 2, 4, env);
  const auto second = choose_device(1, 2, 4, env);
  EXPECT_EQ(first.cuda_index, 1);
  EXPECT_EQ(second.cuda_index, 3);
  EXPECT_EQ(second.summary(), "cuda:3 (SLURM_STEP_GPUS=1,3 of 4 visible GPUs: GPU 3)");
  EXPECT_EQ(choose_device(2, 3, 4, env).summary(),
            "cuda:1 (SLURM_STEP_GPUS=1,3 of 4 visible GPUs: GPU 1; shared by 2 local ranks)");
  // Ranges, and the job's list when the step has none.
  const auto ranged = choose_device(5, 8, 8, {{"SLURM_JOB_GPUS", "0-3"}});
  EXPECT_EQ(ranged.cuda_index, 1);
  EXPECT_EQ(ranged.reason, "SLURM_JOB_GPUS=0-3 of 8 visible GPUs");
  EXPECT_EQ(choose_device(1, 2, 4, {{"GPU_DEVICE_ORDINAL", "2,3"}}).cuda_index, 3);
}

TEST(ChooseDevice, SlurmGpusNameConfinedDevices) {
  // cgroup confinement: LibTorch sees exactly the step's GPUs, as 0..n-1.
  const auto c = choose_device(1, 2, 2, {{"SLURM_JOB_GPUS", "4,5"}});
  EXPECT_EQ(c.cuda_index, 1);
  EXPECT_EQ(c.summary(), "cuda:1 (SLURM_JOB_GPUS=4,5: GPU 5)");
  // A list that fits neither view is not used.
  EXPECT_EQ(choose_device(1, 2, 2, {{"SLURM_STEP_GPUS", "0,1,2,3,4"}}).summary(), "cuda:1 (2 GPUs visible)");
  EXPECT_EQ(choose_device(1, 2, 2, {{"SLURM_STEP_GPUS", "gpu0,gpu1"}}).summary(), "cuda:1 (2 GPUs visible)");
}

TEST(ChooseDevice, LocalRankFromTheLauncherWhenMpiDoesNotKnow) {
  const auto ompi = choose_device(
      -1, 0, 2, {{"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}, {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(ompi.local_rank, 3);
  EXPECT_EQ(ompi.local_size, 4);
  EXPECT_EQ(ompi.local_rank_source, "OMPI_COMM_WORLD_LOCAL_RANK");
  EXPECT_EQ(ompi.cuda_index, 1);
  EXPECT_EQ(ompi.ranks_sharing, 2);

  // Slurm: the size comes from SLURM_TASKS_PER_NODE at SLURM_NODEID.
  Environment slurm{{"SLURM_LOCALID", "1"}, {"SLURM_TASKS_PER_NODE", "4(x2),2"}, {"SLURM_NODEID", "2"}};
  auto c = choose_device(-1, 0, 4, slurm);
  EXPECT_EQ(c.local_rank_source, "SLURM_LOCALID");
  EXPECT_EQ(c.local_rank, 1);
  EXPECT_EQ(c.local_size, 2);
  EXPECT_EQ(c.cuda_index, 1);
  slurm["SLURM_NODEID"] = "1";
  EXPECT_EQ(choose_device(-1, 0, 4, slurm).local_size, 4);
  slurm["SLURM_NODEID"] = "7";  // beyond the list: size unknown
  c = choose_device(-1, 0, 4, slurm);
  EXPECT_EQ(c.local_size, 0);
  EXPECT_EQ(c.ranks_sharing, 0);
  EXPECT_EQ(c.summary(), "cuda:1 (4 GPUs visible)");

  // Garbage is skipped; MPICH's variables work too.
  const auto mpich = choose_device(
      -1, 0, 2, {{"OMPI_COMM_WORLD_LOCAL_RANK", "x1"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
  EXPECT_EQ(mpich.local_rank_source, "MPI_LOCALRANKID");
  EXPECT_EQ(mpich.local_rank, 1);
  EXPECT_EQ(mpich.local_size, 2);
  // A size that cannot hold the rank is dropped, the rank kept.
  const auto odd = choose_device(-1, 0, 2, {{"MV2_COMM_WORLD_LOCAL_RANK", "5"}, {"MV2_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(odd.local_rank, 5);
  EXPECT_EQ(odd.local_size, 0);
  EXPECT_EQ(odd.cuda_index, 1);

  // Nothing at all: a single process.
  const auto alone = choose_device(-1, 0, 3, {});
  EXPECT_EQ(alone.local_rank, 0);
  EXPECT_EQ(alone.local_size, 1);
  EXPECT_EQ(alone.local_rank_source, "default");
  EXPECT_EQ(alone.cuda_index, 0);
}

TEST(ChooseDevice, MpisLocalRankWinsOverTheEnvironment) {
  const auto c = choose_device(0, 2, 2, {{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(c.local_rank, 0);
  EXPECT_EQ(c.local_rank_source, "MPI");
  EXPECT_EQ(c.cuda_index, 0);
}

TEST(ChooseDevice, RefusesImpossibleInputs) {
  EXPECT_THROW(choose_device(0, 1, -1, {}), UsageError);
  EXPECT_THROW(choose_device(2, 2, 1, {}), UsageError);
  EXPECT_THROW(choose_device(0, 0, 1, {}), UsageError);
}

}  // namespace
}  // namespace h5dcp
