// The shared main of MPI test binaries: ROMIO selected before MPI_Init (the
// project's MPI-IO default), every rank runs every test, rank 0 prints the
// usual report, other ranks print only their failures prefixed with their
// rank, and the exit code is the worst of all ranks. With
// --h5dcp-expected-ranks=N (added by h5dcp_add_mpi_test) it first checks
// that mpiexec really started N ranks.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "h5dcp/mpi_io.hpp"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  h5dcp::prefer_romio_io_component();
  // Async saves need MPI_THREAD_MULTIPLE (their background thread uses MPI).
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char* flag = "--h5dcp-expected-ranks=";
  for (int a = 1; a < argc; ++a) {
    if (std::strncmp(argv[a], flag, std::strlen(flag)) == 0 && std::stoi(argv[a] + std::strlen(flag)) != size) {
      if (rank == 0) std::fprintf(stderr, "expected %s ranks, mpiexec started %d\n", argv[a] + std::strlen(flag), size);
      MPI_Finalize();
      return 1;
    }
  }
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  int result = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
