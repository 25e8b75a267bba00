#include "test_support.hpp"

#include <dirent.h>
#include <ftw.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

namespace h5dcp::test {
namespace {

bool mpi_active() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

}  // namespace

int world_rank() {
  int rank = 0;
  if (mpi_active()) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  if (mpi_active()) MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

double time_scale() {
  const char* scale = std::getenv("H5DCP_TEST_TIME_SCALE");
  return scale != nullptr && std::atof(scale) > 0 ? std::atof(scale) : 1.0;
}

TempDir::TempDir() {
  char name[4096] = "";
  if (world_rank() == 0) {
    const char* base = std::getenv("H5DCP_TEST_TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/h5dcp-test-XXXXXX";
    std::strncpy(name, pattern.c_str(), sizeof name - 1);
    if (::mkdtemp(name) == nullptr) std::abort();
  }
  if (mpi_active()) MPI_Bcast(name, sizeof name, MPI_CHAR, 0, MPI_COMM_WORLD);
  path_ = name;
}

namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  ::remove(path);
  return 0;  // on through the rest, whatever one entry did
}

}  // namespace

TempDir::~TempDir() {
  if (mpi_active()) MPI_Barrier(MPI_COMM_WORLD);
  // nftw, not std::filesystem::remove_all: a LibTorch wheel may export an
  // older libstdc++'s std::filesystem::remove_all, which the dynamic linker
  // then binds here (torch 2.11's CUDA wheel: it calls through a null
  // pointer).
  if (world_rank() == 0) ::nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

std::vector<std::string> TempDir::entries() const {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

at::Tensor reference_tensor(at::IntArrayRef shape, at::ScalarType dtype, std::int64_t seed) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  auto idx = at::arange(seed, seed + n, at::kLong);
  at::Tensor t;
  if (is_bit_pattern_dtype(dtype)) {
    // Bytes ((i * 151 + 13 * seed + 7) mod 256), viewed as the dtype: every
    // byte value, so all 256 float8 codes (NaNs and infinities included) and
    // the high bits of uint64. These dtypes have few CPU kernels (no
    // arithmetic for uint16/32/64 or float8): built from bytes, not values.
    const auto element = static_cast<std::int64_t>(c10::elementSize(dtype));
    const auto bytes = ((at::arange(n * element, at::kLong) * 151 + 13 * seed + 7) % 256).to(at::kByte);
    return n == 0 ? at::empty(shape, at::TensorOptions().dtype(dtype)) : bytes.view(dtype).reshape(shape).contiguous();
  }
  if (dtype == at::kBool) {
    t = (idx % 3) == 0;
  } else if (at::isFloatingType(dtype)) {
    // Multiples of 1/4 in +-63.5 (8 significant bits): exact in every float
    // format, bfloat16 included, so the reference is the same in each.
    t = ((idx % 509) - 254).to(at::kDouble).div(4.0).to(dtype);
    if (n >= 5 && seed == 0) {
      t[0] = -0.0;
      t[1] = std::numeric_limits<double>::infinity();
      t[2] = -std::numeric_limits<double>::infinity();
      t[3] = std::numeric_limits<double>::quiet_NaN();
      // The smallest subnormal of the format.
      auto tiny = at::empty({1}, at::TensorOptions().dtype(dtype));
      const auto bytes = tiny.element_size();
      std::memset(tiny.data_ptr(), 0, bytes);
      static_cast<unsigned char*>(tiny.data_ptr())[0] = 1;
      t.narrow(0, 4, 1).copy_(tiny);
    }
  } else {
    const std::int64_t span = dtype == at::kByte ? 256 : dtype == at::kChar ? 256 : 65536;
    const std::int64_t low = dtype == at::kByte ? 0 : -span / 2;
    t = ((idx * 7919) % span + low).to(dtype);
    if (dtype == at::kLong && n >= 2) {
      t[0] = std::numeric_limits<std::int64_t>::min();
      t[1] = std::numeric_limits<std::int64_t>::max();
    }
  }
  return t.reshape(shape).contiguous();
}

const std::vector<at::ScalarType>& all_dtypes() {
  static const std::vector<at::ScalarType> dtypes{at::kDouble,
                                                  at::kFloat,
                                                  at::kHalf,
                                                  at::kBFloat16,
                                                  at::kLong,
                                                  at::kInt,
                                                  at::kShort,
                                                  at::kChar,
                                                  at::kByte,
                                                  at::kBool,
                                                  at::kUInt16,
                                                  at::kUInt32,
                                                  at::kUInt64,
                                                  at::kFloat8_e4m3fn,
                                                  at::kFloat8_e5m2,
                                                  at::kFloat8_e4m3fnuz,
                                                  at::kFloat8_e5m2fnuz,
                                                  at::kFloat8_e8m0fnu,
                                                  at::kComplexHalf,
                                                  at::kComplexFloat,
                                                  at::kComplexDouble};
  return dtypes;
}

bool is_bit_pattern_dtype(at::ScalarType dtype) {
  switch (dtype) {
    case at::kUInt16:
    case at::kUInt32:
    case at::kUInt64:
    case at::kFloat8_e4m3fn:
    case at::kFloat8_e5m2:
    case at::kFloat8_e4m3fnuz:
    case at::kFloat8_e5m2fnuz:
    case at::kFloat8_e8m0fnu:
    case at::kComplexHalf:
    case at::kComplexFloat:
    case at::kComplexDouble: return true;
    default: return false;
  }
}

bool bitwise_equal(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || !a.sizes().equals(b.sizes())) return false;
  const auto ca = a.contiguous();
  const auto cb = b.contiguous();
  // (memcmp must not see the null data pointer of an empty tensor, even for 0 bytes)
  return ca.numel() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.numel() * ca.element_size()) == 0;
}

std::vector<std::int64_t> uneven_cuts(std::int64_t n, int parts) {
  // Sizes proportional to parts, parts-1, ..., 1: deliberately uneven.
  std::vector<std::int64_t> cuts{0};
  const std::int64_t weight_total = static_cast<std::int64_t>(parts) * (parts + 1) / 2;
  std::int64_t acc = 0;
  for (int p = 0; p < parts; ++p) {
    acc += parts - p;
    cuts.push_back(n * acc / weight_total);
  }
  return cuts;
}

ShardedTensor grid_shards(const at::Tensor& full, int grid_rows, int grid_cols, int rank, int size) {
  const auto rows = uneven_cuts(full.size(0), grid_rows);
  const auto cols = uneven_cuts(full.size(1), grid_cols);
  std::vector<Shard> shards;
  int block = 0;
  for (int r = 0; r < grid_rows; ++r)
    for (int c = 0; c < grid_cols; ++c, ++block) {
      if (block % size != rank) continue;
      auto piece = full.narrow(0, rows[r], rows[r + 1] - rows[r]).narrow(1, cols[c], cols[c + 1] - cols[c]).clone();
      shards.push_back(Shard{piece, {rows[r], cols[c]}});
    }
  return ShardedTensor({full.size(0), full.size(1)}, std::move(shards));
}

ShardedTensor zeros_like(const ShardedTensor& like) {
  std::vector<Shard> shards;
  for (const auto& s : like.local_shards()) shards.push_back(Shard{at::zeros_like(s.tensor), s.offsets});
  return ShardedTensor(like.global_shape(), std::move(shards));
}

}  // namespace h5dcp::test
