// The MPI-IO component trap (open-mpi/ompi#12718): OpenMPI 4.1's OMPIO has
// corrupted parallel HDF5 data on local file systems. h5dcp's programs and
// tests use ROMIO; this test proves that choice is in force and correct for
// the access pattern that broke: uneven, interleaved shards from every rank,
// written collectively, every byte checked.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "h5dcp/h5dcp.hpp"
#include "test_support.hpp"

// Counts this process's dataset writes that HDF5 really did collectively:
// H5Dwrite, defined here, takes the place of HDF5's (the binary exports it,
// see tests/CMakeLists.txt), hands every call on unchanged, and then asks
// HDF5 which I/O the transfer used (H5Pget_mpio_actual_io_mode: what
// happened, not what was asked for).
namespace {
int collective_writes = 0;
}  // namespace

extern "C" herr_t H5Dwrite(hid_t dataset, hid_t mem_type, hid_t mem_space, hid_t file_space, hid_t dxpl,
                           const void* buf) {
  using Write = herr_t (*)(hid_t, hid_t, hid_t, hid_t, hid_t, const void*);
  static const auto hdf5_write = reinterpret_cast<Write>(::dlsym(RTLD_NEXT, "H5Dwrite"));
  const herr_t status = hdf5_write(dataset, mem_type, mem_space, file_space, dxpl, buf);
  H5D_mpio_actual_io_mode_t mode = H5D_MPIO_NO_COLLECTIVE;
  if (status >= 0 && dxpl != H5P_DEFAULT && H5Pget_mpio_actual_io_mode(dxpl, &mode) >= 0 &&
      mode != H5D_MPIO_NO_COLLECTIVE)
    ++collective_writes;
  return status;
}

namespace h5dcp {
namespace {

// The MPI-IO components OpenMPI has loaded into this process (their
// mca_io_<name>.so mapped). With the component chosen, OpenMPI opens that one
// alone; otherwise it opens every one and picks OMPIO by priority.
bool component_loaded(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/mca_io_" + name) != std::string::npos) return true;
  return false;
}

bool is_open_mpi() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  return std::string(version, static_cast<std::size_t>(length)).find("Open MPI") != std::string::npos;
}

// What the process really uses, not what a variable asks for: after an MPI-IO
// write, ROMIO is loaded and OMPIO is not. CTest also runs this test with
// OMPI_MCA_io unset (mpi.romio_default.np2), where only the project's
// default (the test main's prefer_romio_io_component) can make it pass.
TEST(InterleavedIo, TheProjectDefaultComponentIsRomio) {
  if (!is_open_mpi()) GTEST_SKIP() << "the MPI-IO component choice is OpenMPI's";
  test::TempDir dir;
  save(StateDict{{"w", test::grid_shards(test::reference_tensor({8, 4}, at::kFloat), 2, 2, test::world_rank(),
                                         test::world_size())}},
       dir.file("io.h5"));
  EXPECT_TRUE(component_loaded("romio")) << "ROMIO is not loaded after an MPI-IO write";
  EXPECT_FALSE(component_loaded("ompio")) << "OMPIO is loaded: OpenMPI may select it (open-mpi/ompi#12718)";
  EXPECT_FALSE(ompio_may_be_in_use());
}

// Where the row blocks start: 1..7 rows each (a repeating uneven pattern),
// about 600 rows; the last entry is the row count.
std::vector<std::int64_t> row_block_starts() {
  std::vector<std::int64_t> starts{0};
  for (int b = 0; starts.back() < 600; ++b) starts.push_back(starts.back() + 1 + (b * 5) % 7);
  return starts;
}

// Blocks of row_block_starts(); with `split_columns`
// each row block is also cut into two uneven column ranges, so that its
// pieces are scattered through the file. Pieces are dealt round-robin, so
// every rank's data is interleaved with every other rank's in the file.
std::vector<Shard> interleaved_shards(const at::Tensor& full, bool split_columns) {
  const int rank = test::world_rank();
  const int size = test::world_size();
  const std::int64_t cols = full.size(1);
  const auto starts = row_block_starts();
  std::vector<Shard> mine;
  int piece = 0;
  for (std::size_t b = 0; b + 1 < starts.size(); ++b) {
    const auto rows = full.narrow(0, starts[b], starts[b + 1] - starts[b]);
    const std::int64_t cut = split_columns ? 1 + (static_cast<std::int64_t>(b) * 317) % (cols - 1) : cols;
    for (const auto& [c0, c1] : {std::pair{std::int64_t{0}, cut}, std::pair{cut, cols}}) {
      if (c1 == c0) continue;
      if (piece++ % size == rank) mine.push_back(Shard{rows.narrow(1, c0, c1 - c0).clone(), {starts[b], c0}});
    }
  }
  return mine;
}

TEST(InterleavedIo, UnevenInterleavedShardsSurviveEveryByte) {
  test::TempDir dir;
  const std::int64_t cols = 1031;  // odd row length: no block is aligned
  const std::int64_t rows = row_block_starts().back();
  // Row blocks are single ranges of the file, written independently; grid
  // blocks are scattered, and IoMode::Collective writes them collectively
  // (two-phase I/O through ROMIO: the path ompi#12718 broke).
  for (const bool grid : {false, true}) {
    for (const auto dtype : {at::kFloat, at::kByte, at::kDouble}) {
      const auto full = test::reference_tensor({rows, cols}, dtype, 11);
      StateDict sd{{"interleaved", ShardedTensor({rows, cols}, interleaved_shards(full, grid))}};
      const auto path = dir.file(std::string(grid ? "grid." : "rows.") + c10::toString(dtype) + ".h5");
      const int writes_before = collective_writes;
      save(sd, path, SaveOptions{{0}, IoMode::Collective});
      if (grid) {
        EXPECT_GT(collective_writes, writes_before) << "the grid blocks were not written collectively";
      }

      StateDict whole{{"interleaved", at::zeros_like(full)}};
      load(whole, path);
      const auto& got = std::get<at::Tensor>(whole.at("interleaved"));
      EXPECT_TRUE(test::bitwise_equal(got, full)) << (grid ? "grid " : "rows ") << c10::toString(dtype) << ": "
                                                  << (got != full).sum().item<std::int64_t>() << " elements differ";
    }
  }
}

}  // namespace
}  // namespace h5dcp
