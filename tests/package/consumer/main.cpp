// Uses only the installed public headers: saves a row-sharded tensor from
// every rank and loads it back whole; and, from h5dcp::training, the device
// a rank without GPUs gets (the CPU).
#include <ATen/ATen.h>
#include <mpi.h>

#include <cstdio>

#include <h5dcp/h5dcp.hpp>
#include <h5dcp/training.hpp>

int main(int argc, char** argv) {
  h5dcp::prefer_romio_io_component();
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const auto full = at::arange(4 * size * 3, at::kFloat).reshape({4 * size, 3});
  h5dcp::StateDict sd{
      {"w", h5dcp::ShardedTensor({4 * size, 3}, {h5dcp::Shard{full.narrow(0, 4 * rank, 4).clone(), {4 * rank, 0}}})}};
  int ok = 0;
  try {
    h5dcp::save(sd, argv[1]);
    h5dcp::StateDict back{{"w", at::zeros_like(full)}};
    h5dcp::load(back, argv[1]);
    ok = at::equal(std::get<at::Tensor>(back.at("w")), full) &&
         h5dcp::choose_device(rank, size, 0, {}).device() == "cpu";
  } catch (const h5dcp::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
  }
  int all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0 && all) std::printf("consumer: round trip ok on %d ranks (h5dcp %s)\n", size, h5dcp::kLibraryVersion);
  MPI_Finalize();
  return all ? 0 : 1;
}
