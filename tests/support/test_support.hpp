#pragma once
// Helpers shared by the tests: deterministic tensors, exact comparison,
// shardings, temporary directories.

#include <ATen/ATen.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "h5dcp/async_save.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/sharded_tensor.hpp"

namespace h5dcp::test {

/// Rank and size of MPI_COMM_WORLD, or 0 and 1 without MPI.
int world_rank();
int world_size();

/// H5DCP_TEST_TIME_SCALE (1 when unset; CTest sets it for MPI tests,
/// cmake/H5dcpMpiTest.cmake): short deadlines are multiplied by it, so that
/// a rank slowed by the sanitizers or by tests beside this one trips them
/// only by a real stall.
double time_scale();

/// A fresh directory shared by all ranks (created by rank 0, name broadcast);
/// removed with its content when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  /// Names in the directory (hidden ones included), sorted.
  std::vector<std::string> entries() const;

 private:
  std::string path_;
};

/// The same deterministic tensor on every rank: distinct values per element,
/// exactly representable in `dtype`; for floating dtypes the first elements
/// are -0.0, +inf, -inf, NaN and the smallest subnormal, so a bit-exact
/// comparison catches any conversion; for is_bit_pattern_dtype dtypes a
/// pattern of bytes (every byte value, NaN codes included).
at::Tensor reference_tensor(at::IntArrayRef shape, at::ScalarType dtype, std::int64_t seed = 0);

/// True when both tensors have the same dtype, shape and bytes.
bool bitwise_equal(const at::Tensor& a, const at::Tensor& b);

/// The PyTorch 2.x dtypes (uint16/32/64, the float8 variants, complex) whose
/// reference_tensor is a pattern of bytes covering every byte value.
bool is_bit_pattern_dtype(at::ScalarType dtype);

/// Every dtype h5dcp stores, in DType order.
const std::vector<at::ScalarType>& all_dtypes();

/// Boundaries that split `n` into `parts` uneven pieces (sizes differ by
/// design: first pieces larger), as `parts + 1` cut points.
std::vector<std::int64_t> uneven_cuts(std::int64_t n, int parts);

/// The blocks of a `rows` x `cols` grid over `full` (uneven cuts), given to
/// ranks round-robin; the blocks of `rank` as shards (clones, so a load into
/// them is checked against `full`).
ShardedTensor grid_shards(const at::Tensor& full, int grid_rows, int grid_cols, int rank, int size);

/// Runs `fn`, which must throw a CheckpointError on this rank (a test
/// failure is recorded otherwise), and returns that error.
template <typename Fn>
CheckpointError expect_checkpoint_error(Fn&& fn) {
  try {
    fn();
  } catch (const CheckpointError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a CheckpointError on rank " << world_rank();
  return CheckpointError("none", std::map<int, std::string>{});
}

/// Zero-filled shards with the same layout as `like`.
ShardedTensor zeros_like(const ShardedTensor& like);

/// Async save options with `bytes` of staging memory.
inline AsyncSaveOptions staging_of(std::int64_t bytes) {
  AsyncSaveOptions options;
  options.staging_bytes = bytes;
  return options;
}

}  // namespace h5dcp::test
