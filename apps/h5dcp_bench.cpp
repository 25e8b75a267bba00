// h5dcp-bench: h5dcp side by side with the physical limit, in one run.
//
//   mpiexec -n 2 h5dcp-bench [--gib 1] [--reps 5] [--dir DIR] [--drop-caches] [--json FILE] (--help: more)
//
// The data is that of the peer benchmark (scripts/dcp_peer_bench.py, PyTorch's
// DCP): 4 float32 tensors [rows, 4096], row-sharded over the ranks. One
// untimed warm-up repetition comes first (--warmup), as for the peers. Every
// timed save includes making the data durable (fsync). Medians over the
// repetitions:
//   raw       MPI_File_write_at_all of the same bytes at the same offsets + MPI_File_sync
//             (and with MPI_File_write_at, each rank on its own)
//   save      h5dcp::save
//   load      h5dcp::load, same sharding
//   reshard   h5dcp::load with every rank loading another rank's rows (DCP's "rank shift")
//   async     h5dcp::async_save: time the caller blocks, and until the future is ready
//   small     5,000 tensors of 16 KiB vs the same bytes in 4 sharded tensors, and
//             bare HDF5 making the same 5,000 datasets (the floor under h5dcp's)
// and the peak resident memory of each rank.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "bench_hdf5_floor.hpp"
#include "h5dcp/h5dcp.hpp"

namespace {

struct Args {
  double gib = 1.0;
  int reps = 5;
  int warmup = 1;  // untimed repetitions first: first touches, HDF5's and MPI's set-up
  std::string dir = "/tmp/h5dcp-bench";
  bool drop_caches = false;
  std::string json;
  int small_count = 5000;
  int small_kib = 16;
  std::int64_t staging_mib = 0;  // 0: this rank's bytes
  bool independent = false;      // h5dcp saves with independent instead of collective writes
  bool save_only = false;        // only the raw write and the h5dcp save (to measure a knob)
  bool raw_only = false;         // only the raw MPI-IO baseline (to time another MPI-IO component)
  bool async_only = false;       // only the raw write and the async save (to profile it)
};

constexpr int kTensors = 4;
constexpr std::int64_t kCols = 4096;

int rank_ = 0;
int size_ = 1;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Wall time of `fn` across all ranks (barrier before and after).
template <typename Fn>
double timed(Fn&& fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = now();
  fn();
  MPI_Barrier(MPI_COMM_WORLD);
  return now() - t0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void drop_caches(bool enabled) {
  if (!enabled) return;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) {
    ::sync();
    std::ofstream("/proc/sys/vm/drop_caches") << "3\n";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

std::int64_t status_bytes(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::strlen(field))) * 1024;
  return 0;
}

// Memory `fn` adds on top of what the process already holds: the peak
// resident set during it (reset first through /proc/self/clear_refs) minus
// the resident set before it. Largest over the ranks.
template <typename Fn>
std::int64_t added_memory(Fn&& fn) {
  std::ofstream("/proc/self/clear_refs") << "5\n";
  const auto before = status_bytes("VmRSS:");
  fn();
  std::int64_t added = status_bytes("VmHWM:") - before;
  MPI_Allreduce(MPI_IN_PLACE, &added, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return added;
}

// The rows of tensor i that `owner` holds, with DCP's values (row + i * 1e6).
at::Tensor rows_of(std::int64_t rows_per_rank, int owner, int i, bool fill) {
  if (!fill) return at::zeros({rows_per_rank, kCols}, at::kFloat);
  return (at::arange(rows_per_rank, at::kFloat).unsqueeze(1) + static_cast<double>(owner * rows_per_rank) + i * 1e6)
      .expand({rows_per_rank, kCols})
      .contiguous();
}

h5dcp::StateDict sharded_state(std::int64_t rows, int shift, bool fill) {
  const auto per_rank = rows / size_;
  const int owner = (rank_ + shift) % size_;
  h5dcp::StateDict sd;
  for (int i = 0; i < kTensors; ++i)
    sd["layer" + std::to_string(i) + ".weight"] =
        h5dcp::ShardedTensor({rows, kCols}, {h5dcp::Shard{rows_of(per_rank, owner, i, fill), {owner * per_rank, 0}}});
  return sd;
}

bool check(const h5dcp::StateDict& sd, std::int64_t rows, int shift) {
  const auto per_rank = rows / size_;
  const int owner = (rank_ + shift) % size_;
  int ok = 1;
  for (int i = 0; i < kTensors; ++i) {
    const auto& s = std::get<h5dcp::ShardedTensor>(sd.at("layer" + std::to_string(i) + ".weight"));
    ok &= at::equal(s.local_shards()[0].tensor, rows_of(per_rank, owner, i, true)) ? 1 : 0;
  }
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok == 1;
}

// Every timed save writes a new file, from a settled disk: the file a case
// wrote before is removed untimed, and sync() waits until the file system
// has written and freed everything (on ext4 with `discard` freeing a GiB
// keeps the disk busy for a quarter second, which would otherwise land in
// whichever case comes next).
void fresh(const std::string& path) {
  if (rank_ == 0) {
    std::filesystem::remove(path);
    ::sync();
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// The same bytes at the same file offsets as h5dcp's datasets, raw, into a
// new file (as every checkpoint is: overwriting the blocks of an existing
// file skips the file system's block allocation and is no fair limit).
// `collective`: MPI_File_write_at_all (the baseline); otherwise
// MPI_File_write_at, each rank on its own (no two-phase rounds: the faster
// limit for row blocks, which are contiguous in the file).
void raw_write(const std::string& path, const h5dcp::StateDict& sd, std::int64_t rows, bool collective) {
  MPI_File file;
  MPI_File_open(MPI_COMM_WORLD, path.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &file);
  const auto tensor_bytes = rows * kCols * 4;
  for (int i = 0; i < kTensors; ++i) {
    const auto& shard =
        std::get<h5dcp::ShardedTensor>(sd.at("layer" + std::to_string(i) + ".weight")).local_shards()[0];
    const auto* data = static_cast<const char*>(shard.tensor.data_ptr());
    std::int64_t left = shard.tensor.numel() * 4;
    MPI_Offset offset = i * tensor_bytes + shard.offsets[0] * kCols * 4;
    // Collective calls in pieces of at most 1 GiB (MPI counts are int); the
    // same number of calls on every rank.
    std::int64_t calls = (left + (1 << 30) - 1) >> 30;
    MPI_Allreduce(MPI_IN_PLACE, &calls, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    for (std::int64_t c = 0; c < calls; ++c) {
      const int n = static_cast<int>(std::min<std::int64_t>(left, 1 << 30));
      if (collective)
        MPI_File_write_at_all(file, offset, data, n, MPI_BYTE, MPI_STATUS_IGNORE);
      else if (n > 0)
        MPI_File_write_at(file, offset, data, n, MPI_BYTE, MPI_STATUS_IGNORE);
      data += n;
      offset += n;
      left -= n;
    }
  }
  MPI_File_sync(file);
  MPI_File_close(&file);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    auto value = [&]() -> std::string { return a + 1 < argc ? argv[++a] : ""; };
    if (arg == "--gib")
      args.gib = std::stod(value());
    else if (arg == "--reps")
      args.reps = std::stoi(value());
    else if (arg == "--warmup")
      args.warmup = std::stoi(value());
    else if (arg == "--dir")
      args.dir = value();
    else if (arg == "--drop-caches")
      args.drop_caches = true;
    else if (arg == "--json")
      args.json = value();
    else if (arg == "--small-count")
      args.small_count = std::stoi(value());
    else if (arg == "--small-kib")
      args.small_kib = std::stoi(value());
    else if (arg == "--staging-mib")
      args.staging_mib = std::stoll(value());
    else if (arg == "--raw-only")
      args.raw_only = true;
    else if (arg == "--independent")
      args.independent = true;
    else if (arg == "--save-only")
      args.save_only = true;
    else if (arg == "--async-only")
      args.async_only = true;
    else {
      std::printf(
          "usage: mpiexec -n N h5dcp-bench [--gib G] [--reps R] [--warmup W] [--dir DIR] [--drop-caches]\n"
          "                                 [--json FILE]\n"
          "                                 [--small-count N] [--small-kib K] [--staging-mib M] [--raw-only]\n"
          "                                 [--independent] [--save-only] [--async-only]\n");
      return arg == "--help" || arg == "-h" ? 0 : 2;
    }
  }
  h5dcp::prefer_romio_io_component();
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  at::set_num_threads(1);
  if (rank_ == 0) std::filesystem::create_directories(args.dir);

  std::int64_t rows = static_cast<std::int64_t>(args.gib * (1 << 30) / 4 / kTensors / kCols);
  rows -= rows % size_;
  const double gb = static_cast<double>(rows) * kCols * 4 * kTensors / 1e9;
  const auto per_rank_bytes = rows / size_ * kCols * 4 * kTensors;
  const std::string ckpt = args.dir + "/ckpt.h5";

  auto saved = sharded_state(rows, 0, true);
  auto copy_target = at::zeros({per_rank_bytes / 4}, at::kFloat);  // touched now, as async staging memory is
  h5dcp::AsyncSaveOptions async_options;
  async_options.staging_bytes = args.staging_mib > 0 ? args.staging_mib << 20 : per_rank_bytes;
  const auto async_save = [&] { h5dcp::async_save(saved, args.dir + "/async.h5", async_options).get(); };
  // The small-tensor case: replicated 16 KiB tensors (each written once) vs
  // the same bytes in 4 row-sharded tensors.
  h5dcp::StateDict small;
  const std::int64_t small_elems = args.small_kib * 1024 / 4;
  for (int i = 0; i < args.small_count; ++i)
    small["t" + std::to_string(i)] = at::full({small_elems}, static_cast<float>(i));
  std::int64_t large_rows = static_cast<std::int64_t>(args.small_count) * small_elems / kTensors / kCols;
  large_rows = std::max<std::int64_t>(size_, large_rows - large_rows % size_);
  auto large = sharded_state(large_rows, 0, true);

  // The first async save allocates and touches the staging memory, once for
  // the run: made here, untimed, so that no repetition includes it.
  if (!args.raw_only && !args.save_only) async_save();

  std::map<std::string, std::vector<double>> t;
  bool correct = true;
  for (int rep = -args.warmup; rep < args.reps; ++rep) {
    if (rep == 0) t.clear();  // the warm-up repetitions are not counted (their checks are)
    fresh(args.dir + "/raw.bin");
    t["raw"].push_back(timed([&] { raw_write(args.dir + "/raw.bin", saved, rows, true); }));
    fresh(args.dir + "/raw.bin");
    t["raw_independent"].push_back(timed([&] { raw_write(args.dir + "/raw.bin", saved, rows, false); }));
    if (args.raw_only) continue;
    if (args.async_only) {
      fresh(args.dir + "/async.h5");
      t["async_total"].push_back(timed(async_save));
      continue;
    }
    h5dcp::SaveOptions save_options;
    if (args.independent) save_options.io_mode = h5dcp::IoMode::Independent;
    fresh(ckpt);
    t["save"].push_back(timed([&] { h5dcp::save(saved, ckpt, save_options); }));
    if (args.save_only) continue;
    drop_caches(args.drop_caches);
    auto same = sharded_state(rows, 0, false);
    t["load"].push_back(timed([&] { h5dcp::load(same, ckpt); }));
    correct &= check(same, rows, 0);
    drop_caches(args.drop_caches);
    auto shifted = sharded_state(rows, size_ > 1 ? 1 : 0, false);
    t["reshard"].push_back(timed([&] { h5dcp::load(shifted, ckpt); }));
    correct &= check(shifted, rows, size_ > 1 ? 1 : 0);
    double blocking = 0;
    fresh(args.dir + "/async.h5");
    t["async_total"].push_back(timed([&] {
      const double t0 = now();
      auto future = h5dcp::async_save(saved, args.dir + "/async.h5", async_options);
      blocking = now() - t0;
      future.get();
    }));
    MPI_Allreduce(MPI_IN_PLACE, &blocking, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t["async_blocking"].push_back(blocking);
    // The floor under the blocking time: copying this rank's shards into
    // memory that is already touched, nothing else.
    t["staging_copy"].push_back(timed([&] {
      std::int64_t offset = 0;
      for (const auto& [name, value] : saved) {
        const auto& shard = std::get<h5dcp::ShardedTensor>(value).local_shards()[0].tensor;
        copy_target.narrow(0, offset, shard.numel()).copy_(shard.reshape({-1}));
        offset += shard.numel();
      }
    }));
    fresh(args.dir + "/small.h5");
    t["small"].push_back(timed([&] { h5dcp::save(small, args.dir + "/small.h5"); }));
    fresh(args.dir + "/large.h5");
    t["small_as_large"].push_back(timed([&] { h5dcp::save(large, args.dir + "/large.h5"); }));
    const auto floor_path = args.dir + "/hdf5-floor.h5";
    fresh(floor_path);
    t["small_hdf5_bare"].push_back(
        h5dcp_bench::hdf5_many_datasets_seconds(floor_path, args.small_count, small_elems, 0, MPI_COMM_WORLD));
    fresh(floor_path);
    t["small_hdf5_attrs"].push_back(
        h5dcp_bench::hdf5_many_datasets_seconds(floor_path, args.small_count, small_elems, 7, MPI_COMM_WORLD));
  }
  // Memory: what a save adds to a process that holds its shards (and, for
  // async saves, their staging memory, allocated before the repetitions).
  const bool measure_memory = !args.raw_only && !args.save_only && !args.async_only;
  const auto sync_added = !measure_memory ? 0 : added_memory([&] { h5dcp::save(saved, ckpt); });
  const auto async_added = !measure_memory ? 0 : added_memory(async_save);
  std::int64_t peak = status_bytes("VmHWM:");
  MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);

  if (rank_ == 0) {
    const double raw = median(t["raw"]);
    const double small_gb = static_cast<double>(args.small_count) * small_elems * 4 / 1e9;
    std::printf("h5dcp-bench: %d ranks, %d x [%lld, %lld] float32 = %.3f GB, %d reps (medians), fsync on, %s, %s\n",
                size_, kTensors, static_cast<long long>(rows), static_cast<long long>(kCols), gb, args.reps,
                args.drop_caches ? "page cache dropped before loads" : "page cache warm",
                correct ? "every load checked: equal" : "LOADS WRONG");
    std::printf("%-28s %10s %10s %14s\n", "case", "seconds", "GB/s", "vs raw write");
    auto row = [&](const char* name, double seconds, double bytes_gb) {
      std::printf("%-28s %10.3f %10.3f %14.2f\n", name, seconds, bytes_gb / seconds, (bytes_gb / seconds) / (gb / raw));
    };
    row("raw MPI-IO write + sync", raw, gb);
    row("raw, independent writes", median(t["raw_independent"]), gb);
    if (!args.raw_only && !args.async_only) row("h5dcp save", median(t["save"]), gb);
    if (args.async_only) row("h5dcp async save (total)", median(t["async_total"]), gb);
    if (measure_memory) {
      row("h5dcp load", median(t["load"]), gb);
      row("h5dcp resharded load", median(t["reshard"]), gb);
      row("h5dcp async save (total)", median(t["async_total"]), gb);
      std::printf("%-28s %10.3f %10s %13.1f%%  of the sync save\n", "h5dcp async save (blocking)",
                  median(t["async_blocking"]), "", 100 * median(t["async_blocking"]) / median(t["save"]));
      std::printf("%-28s %10.3f %10.3f %13.1f%%  of the sync save (the floor)\n", "memory copy of the shards",
                  median(t["staging_copy"]), gb / median(t["staging_copy"]),
                  100 * median(t["staging_copy"]) / median(t["save"]));
      std::printf("%-28s %10.3f %10.3f %14s\n", (std::to_string(args.small_count) + " small tensors save").c_str(),
                  median(t["small"]), small_gb / median(t["small"]), "");
      std::printf("%-28s %10.3f %10.3f %13.2fx  small / large\n", "same bytes in 4 tensors",
                  median(t["small_as_large"]), small_gb / median(t["small_as_large"]),
                  median(t["small"]) / median(t["small_as_large"]));
      for (const auto& [key, name] :
           {std::pair<std::string, const char*>{"small_hdf5_bare", "HDF5 alone, no attributes"},
            {"small_hdf5_attrs", "HDF5 alone, 7 attributes"}})
        std::printf("%-28s %10.3f %10.3f %13.2fx  / large (the floor)\n", name, median(t[key]),
                    small_gb / median(t[key]), median(t[key]) / median(t["small_as_large"]));
      std::printf(
          "memory a save adds per rank: sync %.1f MB, async %.1f MB (shard %.1f MB, staging %.1f MB held "
          "already)\n",
          sync_added / 1e6, async_added / 1e6, per_rank_bytes / 1e6,
          h5dcp::last_async_save_stats().staging_bytes / 1e6);
    }
    if (!args.json.empty()) {
      std::ofstream out(args.json);
      out << "{\n  \"ranks\": " << size_ << ",\n  \"gb\": " << gb << ",\n  \"small_gb\": " << small_gb
          << ",\n  \"reps\": " << args.reps << ",\n  \"warmup_reps\": " << args.warmup
          << ",\n  \"correct\": " << (correct ? "true" : "false") << ",\n  \"sync_save_added_bytes\": " << sync_added
          << ",\n  \"async_save_added_bytes\": " << async_added << ",\n  \"peak_rss_bytes\": " << peak
          << ",\n  \"shard_bytes\": " << per_rank_bytes
          << ",\n  \"staging_bytes\": " << h5dcp::last_async_save_stats().staging_bytes << ",\n  \"mpi_io\": \""
          << (std::getenv("OMPI_MCA_io") ? std::getenv("OMPI_MCA_io") : "default") << "\",\n  \"median_seconds\": {";
      bool first = true;
      for (const auto& [name, v] : t) {
        out << (first ? "\n" : ",\n") << "    \"" << name << "\": " << median(v);
        first = false;
      }
      out << "\n  }\n}\n";
    }
  }
  h5dcp::finish_async_saves();
  MPI_Finalize();
  return correct ? 0 : 1;
}
