#pragma once
// Timing for the benchmarks that run under mpiexec (h5dcp-bench,
// h5dcp-gpu-bench): their common options and start, wall times across all
// ranks, medians, a settled disk before each case, the page cache dropped for
// cold reads.

#include <ATen/Parallel.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "h5dcp/mpi_io.hpp"

namespace h5dcp_bench {

/// The options both benchmarks take.
struct CommonArgs {
  double gib;
  int reps;
  std::string dir;
  int warmup = 1;    // untimed repetitions first: first touches, HDF5's and MPI's set-up
  bool cold = true;  // also time every load with the page cache dropped (when root)
  std::string json;
};

/// Reads --gib, --reps, --warmup, --dir, --no-cold and --json into `common`
/// and hands every other argument to `own(arg, value)`, which says whether it
/// knew it (`value()` takes the argument after it). Returns -1 when every
/// argument was known; otherwise prints `usage` and returns the exit code: 0
/// for --help or -h, 2 for anything else.
inline int parse_args(int argc, char** argv, CommonArgs& common, const char* usage,
                      const std::function<bool(const std::string&, const std::function<std::string()>&)>& own) {
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const std::function<std::string()> value = [&]() -> std::string { return a + 1 < argc ? argv[++a] : ""; };
    if (arg == "--gib")
      common.gib = std::stod(value());
    else if (arg == "--reps")
      common.reps = std::stoi(value());
    else if (arg == "--warmup")
      common.warmup = std::stoi(value());
    else if (arg == "--dir")
      common.dir = value();
    else if (arg == "--no-cold")
      common.cold = false;
    else if (arg == "--json")
      common.json = value();
    else if (!own(arg, value)) {
      std::printf("%s", usage);
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
  return -1;
}

/// Starts MPI as both benchmarks run (ROMIO for MPI-IO, threads for the async
/// saves, one ATen thread per rank) and returns this rank and the ranks' count.
inline std::pair<int, int> start_mpi(int& argc, char**& argv) {
  h5dcp::prefer_romio_io_component();
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  at::set_num_threads(1);
  return {rank, size};
}

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

/// Wall time of `fn` across all ranks (barrier before and after).
template <typename Fn>
double timed(Fn&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  fn();
  MPI_Barrier(MPI_COMM_WORLD);
  return now() - t0;
}

/// The largest of every rank's `seconds`.
inline double slowest(double seconds) {
  MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return seconds;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

/// Whether this process may drop the page cache (rank 0's answer, for all).
inline bool can_drop_caches() {
  int writable = ::access("/proc/sys/vm/drop_caches", W_OK) == 0 ? 1 : 0;
  MPI_Bcast(&writable, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return writable == 1;
}

inline void drop_caches(bool enabled) {
  if (!enabled) return;
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) {
    ::sync();
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/// Runs `fn` with h5dcp's read-ahead hints off (H5DCP_READAHEAD_MIB=0, read
/// by each load), on every rank, to measure what they bring; the variable is
/// then as it was (a window the run was started with stays set), also when
/// `fn` throws.
inline constexpr const char* kReadAheadVariable = "H5DCP_READAHEAD_MIB";
template <typename Fn>
void without_read_ahead(Fn&& fn) {
  const char* before = std::getenv(kReadAheadVariable);
  struct Restore {
    bool had;
    std::string value;
    ~Restore() {
      if (had)
        ::setenv(kReadAheadVariable, value.c_str(), 1);
      else
        ::unsetenv(kReadAheadVariable);
    }
  } restore{before != nullptr, before != nullptr ? before : ""};
  ::setenv(kReadAheadVariable, "0", 1);
  fn();
}

/// Every timed save writes a new file, from a settled disk: the file a case
/// wrote before is removed untimed, and sync() waits until the file system
/// has written and freed everything (on ext4 with `discard` freeing a GiB
/// keeps the disk busy for a quarter second, which would otherwise land in
/// whichever case comes next).
inline void fresh(const std::string& path) {
  if (world_rank() == 0) {
    std::filesystem::remove(path);
    ::sync();
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/// Writes `,\n  "name": {...}` to `out`: one JSON object of `map`'s entries, each value written by `write`.
template <typename Map, typename Write>
void json_object(std::ostream& out, const char* name, const Map& map, Write&& write) {
  out << ",\n  \"" << name << "\": {";
  bool first = true;
  for (const auto& [key, v] : map) {
    out << (first ? "\n" : ",\n") << "    \"" << key << "\": ";
    write(v);
    first = false;
  }
  out << "\n  }";
}

}  // namespace h5dcp_bench
