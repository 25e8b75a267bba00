// The MPI-IO component trap (open-mpi/ompi#12718): OpenMPI 4.1's OMPIO has
// corrupted parallel HDF5 data on local file systems. h5dcp's programs and
// tests use ROMIO; this test proves that choice is in force and correct for
// the access pattern that broke: uneven, interleaved shards from every rank,
// written collectively, every byte checked.

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

namespace h5dcp {
namespace {

TEST(InterleavedIo, TheProjectDefaultComponentIsRomio) {
  const char* io = std::getenv("OMPI_MCA_io");
  ASSERT_NE(io, nullptr) << "the test main selects the MPI-IO component before MPI_Init";
  EXPECT_EQ(std::string(io), "romio321");
  EXPECT_FALSE(ompio_may_be_in_use());
}

TEST(InterleavedIo, UnevenInterleavedShardsSurviveEveryByte) {
  test::TempDir dir;
  const int rank = test::world_rank();
  const int size = test::world_size();
  // Row blocks of 1..7 rows (a repeating uneven pattern), dealt round-robin,
  // so every rank's data is interleaved with every other rank's in the file.
  const std::int64_t cols = 1031;  // odd row length: no block is aligned
  std::vector<std::int64_t> starts{0};
  for (int b = 0; starts.back() < 600; ++b) starts.push_back(starts.back() + 1 + (b * 5) % 7);
  const std::int64_t rows = starts.back();

  for (const auto dtype : {at::kFloat, at::kByte, at::kDouble}) {
    const auto full = test::reference_tensor({rows, cols}, dtype, 11);
    std::vector<Shard> mine;
    for (std::size_t b = 0; b + 1 < starts.size(); ++b)
      if (static_cast<int>(b % size) == rank)
        mine.push_back(Shard{full.narrow(0, starts[b], starts[b + 1] - starts[b]).clone(), {starts[b], 0}});
    StateDict sd{{"interleaved", ShardedTensor({rows, cols}, mine)}};
    const auto path = dir.file(std::string("interleaved.") + c10::toString(dtype) + ".h5");
    save(sd, path, SaveOptions{0, IoMode::Collective});

    StateDict whole{{"interleaved", at::zeros_like(full)}};
    load(whole, path);
    const auto& got = std::get<at::Tensor>(whole.at("interleaved"));
    EXPECT_TRUE(test::bitwise_equal(got, full)) << c10::toString(dtype) << ": "
                                                << (got != full).sum().item<std::int64_t>() << " elements differ";
  }
}

}  // namespace
}  // namespace h5dcp
