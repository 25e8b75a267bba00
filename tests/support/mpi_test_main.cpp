// The shared main of MPI test binaries: ROMIO selected before MPI_Init (the
// project's MPI-IO default), every rank runs every test, rank 0 prints the
// usual report, other ranks print only their failures prefixed with their
// rank, and the run fails when any rank failed. A run in which every
// selected test skipped on every rank (GTEST_SKIP: no GPU, no root, ...) exits 77 on every
// rank, which CTest reports as skipped (SKIP_RETURN_CODE, set by
// h5dcp_add_mpi_test), never as passed. With
// --h5dcp-expected-ranks=N (added by h5dcp_add_mpi_test) it first checks
// that mpiexec really started N ranks.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "h5dcp/mpi_io.hpp"

namespace {

// CTest's SKIP_RETURN_CODE for every MPI test (cmake/H5dcpMpiTest.cmake).
constexpr int kSkipped = 77;

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
  const int result = RUN_ALL_TESTS();
  const auto& unit = *::testing::UnitTest::GetInstance();
  int failed = result != 0 ? 1 : 0;
  int skipped =
      result == 0 && unit.test_to_run_count() > 0 && unit.skipped_test_count() == unit.test_to_run_count() ? 1 : 0;
  int any_failed = 0;
  int every_rank_skipped = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&skipped, &every_rank_skipped, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Finalize();
  if (any_failed != 0) return 1;
  return every_rank_skipped != 0 ? kSkipped : 0;
}
