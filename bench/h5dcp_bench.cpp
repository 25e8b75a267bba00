// h5dcp-bench: h5dcp side by side with the physical limit, in one run.
//
//   mpiexec -n 2 h5dcp-bench [--gib 1] [--reps 5] [--dir DIR] [--no-cold] [--json FILE] (--help: more)
//
// The data is that of the peer benchmark (bench/dcp_peer_bench.py, PyTorch's
// DCP): 4 float32 tensors [rows, 4096], row-sharded over the ranks. One
// untimed warm-up repetition comes first (--warmup), as for the peers. Every
// timed save includes making the data durable (fsync). Medians over the
// repetitions:
//   raw       MPI_File_write_at_all of the same bytes at the same offsets + MPI_File_sync
//             (and with MPI_File_write_at, each rank on its own)
//   posix     the same bytes with pwrite and h5dcp's tricks (space reserved, early
//             write-back), fsync; the same with what a save adds besides HDF5 and
//             MPI-IO (XXH3 of every byte, the atomic publish: rename, directory
//             fsync); with O_DIRECT (dd oflag=direct); read back with
//             pread 16 MiB at a time (dd bs=16M), page cache warm and cold
//   save      h5dcp::save
//   load      h5dcp::load, same sharding
//   reshard   h5dcp::load with every rank loading another rank's rows (DCP's "rank shift")
//   (every load, and the raw read, twice: page cache warm, and cold: dropped as
//   root just before, when /proc/sys/vm/drop_caches is writable and not --no-cold)
//   async     h5dcp::async_save: time the caller blocks, and until the future is ready
//   staged    h5dcp::async_stage_and_save with a training step after it: the time the
//             call blocks, and the time the step then waits on `staged` before its
//             optimizer step; the step's compute (2 x this repetition's bare copy
//             time, a sleep: a GPU step, which leaves the CPU cores free) runs meanwhile
//   small     5,000 tensors of 16 KiB vs the same bytes in 4 sharded tensors, and
//             bare HDF5 making the same 5,000 datasets (the floor under h5dcp's); the
//             5,000 tensors loaded back on every rank, warm and cold
//   transformer  a real model's shape: a 24-layer transformer's state dict with AdamW
//             state (~1,200 tensors from 4 B and 4 KiB to 64 MiB, FSDP-sharded on dim
//             0), saved, then loaded warm and cold (bench_transformer.hpp); with
//             --transformer-layouts, only its bytes written by POSIX calls in three
//             layouts: h5dcp's one shared file, one file with a region per rank, a
//             file per rank
// and the peak resident memory of each rank. Every timed checkpoint is read
// back, untimed, and checked value by value (the async and staged ones once
// their sample is done).
//   --baselines-only  the raw and the POSIX writes alone (bench.sh's
//             alternated save rounds: the save's baselines timed where it sits)
//   --memory-only CASE  what one save, async save, load or resharded load adds
//             to the resident memory, in a process of its own (memory_only)

#include <ATen/ATen.h>
#include <malloc.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench_conditions.hpp"
#include "bench_hdf5_floor.hpp"
#include "bench_mpi_timing.hpp"
#include "bench_posix_baseline.hpp"
#include "bench_state.hpp"
#include "bench_transformer.hpp"
#include "h5dcp/h5dcp.hpp"

namespace {

using h5dcp_bench::drop_caches;
using h5dcp_bench::fresh;
using h5dcp_bench::median;
using h5dcp_bench::now;
using h5dcp_bench::timed;
using h5dcp_bench::without_read_ahead;

// --staging-mib default: the async saves keep AsyncSaveOptions' own staging size.
constexpr std::int64_t kLibraryStaging = -1;

struct Args : h5dcp_bench::CommonArgs {
  int async_samples = 1;  // the bare copies and the async cases, per repetition
  int small_count = 5000;
  int small_kib = 16;
  h5dcp_bench::TransformerShape transformer;  // layers 0: no transformer case
  std::int64_t staging_mib = 0;               // 0: this rank's bytes; kLibraryStaging: the library's default
  bool independent = false;                   // h5dcp saves with independent instead of collective writes
  bool save_only = false;                     // only the raw write and the h5dcp save (to measure a knob)
  // Only the 1 GiB loads, warm and cold, same and resharded, each repetition
  // after an untimed save (bench.sh alternates them with the peer's, so that
  // both read a file just written on a disk in the same state).
  bool load_only = false;
  // No raw MPI-IO writes (with --save-only: bench.sh alternates the save with
  // the peer's, and neither side then writes anything else in between).
  bool no_raw = false;
  bool raw_only = false;    // only the raw MPI-IO baseline (to time another MPI-IO component)
  bool async_only = false;  // only the raw write and the async save (to profile it)
  // Only the transformer case (bench.sh alternates it with the peer's, so
  // that both meet the disk in the same state).
  bool transformer_only = false;
  bool layouts_only = false;  // with transformer_only: only the transformer's POSIX writes (--transformer-layouts)
  std::string memory_case;    // --memory-only CASE: one memory figure, nothing else (memory_only below)
  // Only the save's baselines: the raw MPI-IO writes and the POSIX writes (bench.sh runs them
  // between the save's and the peer's processes in its alternated rounds).
  bool baselines_only = false;
};

constexpr int kTensors = h5dcp_bench::BenchState::kTensors;
constexpr std::int64_t kCols = h5dcp_bench::BenchState::kCols;

int rank_ = 0;
int size_ = 1;

std::int64_t status_bytes(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field, 0) == 0) return std::stoll(line.substr(std::strlen(field))) * 1024;
  return 0;
}

// Memory `fn` adds on top of what the process already holds: the peak
// resident set during it (reset first through /proc/self/clear_refs) minus
// the resident set before it. Largest over the ranks. The heap that glibc
// keeps after frees is handed back first (malloc_trim): left resident, it
// would take `fn`'s buffers unseen.
template <typename Fn>
std::int64_t added_memory(Fn&& fn) {
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5\n";
  const auto before = status_bytes("VmRSS:");
  fn();
  std::int64_t added = status_bytes("VmHWM:") - before;
  MPI_Allreduce(MPI_IN_PLACE, &added, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return added;
}

// Names the case whose save comes next in H5DCP_TRACE's step lines (stderr,
// rank 0), so that the report attributes each save's steps to its case.
void mark(const char* name, int rep) {
  if (rank_ != 0) return;
  std::fprintf(stderr, "[h5dcp-bench case] %s rep %d\n", name, rep);
  std::fflush(stderr);
}

// This rank's bytes of `sd` at the file offsets of h5dcp's datasets (the
// tensors one after another, each row-major).
std::vector<h5dcp_bench::FileRange> file_ranges(const h5dcp::StateDict& sd, std::int64_t rows) {
  std::vector<h5dcp_bench::FileRange> ranges;
  for (int i = 0; i < kTensors; ++i) {
    const auto& shard =
        std::get<h5dcp::ShardedTensor>(sd.at("layer" + std::to_string(i) + ".weight")).local_shards()[0];
    ranges.push_back(
        {i * rows * kCols * 4 + shard.offsets[0] * kCols * 4, shard.tensor.data_ptr(), shard.tensor.numel() * 4});
  }
  return ranges;
}

std::int64_t writeback_bytes() {
  const char* text = std::getenv("H5DCP_WRITEBACK_MIB");  // h5dcp's knob, read the same way
  return (text != nullptr && *text != '\0' ? std::atoll(text) : 32) << 20;
}

h5dcp::StateDict small_state(int count, std::int64_t elements, bool fill) {
  h5dcp::StateDict sd;
  for (int i = 0; i < count; ++i)
    sd["t" + std::to_string(i)] = fill ? at::full({elements}, static_cast<float>(i)) : at::zeros({elements});
  return sd;
}

bool check_small(const h5dcp::StateDict& sd) {
  int ok = 1;
  for (const auto& [key, value] : sd)
    ok &= at::equal(std::get<at::Tensor>(value),
                    at::full_like(std::get<at::Tensor>(value), static_cast<float>(std::stoi(key.substr(1)))))
              ? 1
              : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok == 1;
}

// `state`'s tensors whole (every rank holding every row, as a replicated
// target): the values, or zeros unless `fill`.
h5dcp::StateDict large_whole(const h5dcp_bench::BenchState& state, bool fill) {
  const h5dcp_bench::BenchState whole{state.rows, 0, 1, state.device};  // one rank holding every row
  h5dcp::StateDict sd;
  for (int i = 0; i < kTensors; ++i) sd[whole.name(i)] = whole.rows_of(0, i, fill);
  return sd;
}

// Whether every rank's `sd` holds large_whole(state, true)'s values. Collective.
bool equal_whole(const h5dcp_bench::BenchState& state, const h5dcp::StateDict& sd) {
  const auto expected = large_whole(state, true);
  int ok = 1;
  for (const auto& [key, value] : expected)
    ok &= at::equal(std::get<at::Tensor>(sd.at(key)), std::get<at::Tensor>(value)) ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return ok == 1;
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
  for (const auto& range : file_ranges(sd, rows)) {
    const auto* data = static_cast<const char*>(range.data);
    std::int64_t left = range.bytes;
    MPI_Offset offset = range.offset;
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

// --memory-only CASE (save, async, load, reshard): what one such call adds
// to the resident memory of a process that holds only its shards (the loads:
// their targets; the async save: also the staging memory of one async save
// before it, held from then on as in training). A process of its own per
// case (bench.sh runs each in its own mpiexec): in one process running every
// case, each case's freed buffers stay in glibc's heap and hide the next
// case's. The loads read the file the "save" case leaves (run it first).
// Rank 0 writes {"memory_case", "added_bytes" (largest over the ranks),
// "shard_bytes", "staging_bytes", "correct"} to `json`.
// The async saves' staging memory: --staging-mib's, the library's default, or this rank's shard (0).
std::int64_t staging_bytes(const Args& args, std::int64_t shard_bytes) {
  if (args.staging_mib == kLibraryStaging) return h5dcp::AsyncSaveOptions{}.staging_bytes;
  return args.staging_mib > 0 ? args.staging_mib << 20 : shard_bytes;
}

int memory_only(const Args& args, const h5dcp_bench::BenchState& state, const h5dcp::StateDict& saved) {
  const auto shard_bytes = state.shard_bytes();
  const std::string path = args.dir + "/memory.h5";
  const std::string& which = args.memory_case;
  std::int64_t added = 0;
  std::int64_t staging = 0;
  bool correct = true;
  if (which == "save") {
    fresh(path);
    added = added_memory([&] { h5dcp::save(saved, path); });
  } else if (which == "async") {
    h5dcp::AsyncSaveOptions options;  // as the main run's async saves
    options.staging_bytes = staging_bytes(args, shard_bytes);
    h5dcp::SavePlanCache plan_cache;
    options.plan_cache = &plan_cache;
    const auto async_path = args.dir + "/memory-async.h5";
    const auto async_save = [&] { h5dcp::async_save(saved, async_path, options).get(); };
    async_save();
    added = added_memory(async_save);
    staging = h5dcp::last_async_save_stats().staging_bytes;
    auto back = state.make(0, false);
    h5dcp::load(back, async_path);
    correct = state.equal(back, 0);
    fresh(async_path);
  } else if (which == "load" || which == "reshard") {
    const int shift = which == "reshard" && size_ > 1 ? 1 : 0;
    auto targets = state.make(shift, false);
    added = added_memory([&] { h5dcp::load(targets, path); });
    correct = state.equal(targets, shift);
  } else {
    if (rank_ == 0) std::fprintf(stderr, "h5dcp-bench: --memory-only takes save, async, load or reshard\n");
    return 2;
  }
  if (rank_ == 0) {
    std::printf("h5dcp-bench: memory %s adds per rank (a process of its own): %.1f MB (shard %.1f MB%s), %s\n",
                which.c_str(), added / 1e6, shard_bytes / 1e6,
                staging > 0 ? (", staging " + std::to_string(staging / 1000000) + " MB held already").c_str() : "",
                correct ? "read back: equal" : "READ BACK WRONG");
    if (!args.json.empty())
      std::ofstream(args.json) << "{\"memory_case\": \"" << which << "\", \"ranks\": " << size_
                               << ", \"added_bytes\": " << added << ", \"shard_bytes\": " << shard_bytes
                               << ", \"staging_bytes\": " << staging
                               << ", \"correct\": " << (correct ? "true" : "false") << "}\n";
  }
  return correct ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Args args{{1.0, 5, "/tmp/h5dcp-bench"}};
  // The options that only switch something on.
  const std::vector<std::pair<std::string, std::vector<bool Args::*>>> switches{
      {"--raw-only", {&Args::raw_only}},
      {"--independent", {&Args::independent}},
      {"--save-only", {&Args::save_only}},
      {"--load-only", {&Args::load_only, &Args::no_raw}},
      {"--no-raw", {&Args::no_raw}},
      {"--async-only", {&Args::async_only}},
      {"--transformer-only", {&Args::transformer_only}},
      {"--transformer-layouts", {&Args::transformer_only, &Args::layouts_only}},
      // The raw writes are among its baselines, not before them.
      {"--baselines-only", {&Args::baselines_only, &Args::no_raw}}};
  const int usage = h5dcp_bench::parse_args(
      argc, argv, args,
      "usage: mpiexec -n N h5dcp-bench [--gib G] [--reps R] [--warmup W] [--dir DIR] [--no-cold]\n"
      "                                 [--json FILE] [--async-samples S]\n"
      "                                 [--small-count N] [--small-kib K] [--staging-mib M|default]\n"
      "                                 [--raw-only]\n"
      "                                 [--transformer-layers L (0: none)] [--transformer-hidden H]\n"
      "                                 [--transformer-vocab V]\n"
      "                                 [--independent] [--save-only] [--load-only] [--no-raw]\n"
      "                                 [--async-only]\n"
      "                                 [--transformer-only] [--transformer-layouts]\n"
      "                                 [--memory-only save|async|load|reshard] [--baselines-only]\n",
      [&](const std::string& arg, const auto& value) {
        for (const auto& [name, fields] : switches)
          if (arg == name) {
            for (const auto field : fields) args.*field = true;
            return true;
          }
        if (arg == "--async-samples")
          args.async_samples = std::max(1, std::stoi(value()));
        else if (arg == "--small-count")
          args.small_count = std::stoi(value());
        else if (arg == "--small-kib")
          args.small_kib = std::stoi(value());
        else if (arg == "--transformer-layers")
          args.transformer.layers = std::stoi(value());
        else if (arg == "--transformer-hidden")
          args.transformer.hidden = std::stoll(value());
        else if (arg == "--transformer-vocab")
          args.transformer.vocab = std::stoll(value());
        else if (arg == "--staging-mib") {
          const std::string mib = value();
          args.staging_mib = mib == "default" ? kLibraryStaging : std::stoll(mib);
        } else if (arg == "--memory-only")
          args.memory_case = value();
        else
          return false;
        return true;
      });
  if (usage >= 0) return usage;
  std::tie(rank_, size_) = h5dcp_bench::start_mpi(argc, argv);
  if (rank_ == 0) std::filesystem::create_directories(args.dir);
  const bool cold = args.cold && h5dcp_bench::can_drop_caches();

  const h5dcp_bench::BenchState state{h5dcp_bench::BenchState::rows_for(args.gib, size_), rank_, size_};
  const auto rows = state.rows;
  const double gb = state.gb();
  const auto per_rank_bytes = state.shard_bytes();
  const std::string ckpt = args.dir + "/ckpt.h5";

  auto saved = state.make(0, true);
  if (!args.memory_case.empty()) {  // before anything else is allocated
    const int rc = memory_only(args, state, saved);
    h5dcp::finish_async_saves();
    MPI_Finalize();
    return rc;
  }
  auto copy_target = at::zeros({per_rank_bytes / 4}, at::kFloat);  // touched now, as async staging memory is
  // The same floor into memory written only by the previous sample's copy,
  // as the staging memory is written only by the previous sample's saves:
  // never touched again in between.
  auto idle_target = at::zeros({per_rank_bytes / 4}, at::kFloat);
  // The floor's copy: this rank's shards, one after another, into `target`.
  const auto copy_shards_into = [&](at::Tensor& target) {
    std::int64_t offset = 0;
    for (const auto& shard : h5dcp_bench::local_shards(saved)) {
      target.narrow(0, offset, shard.numel()).copy_(shard.reshape({-1}));
      offset += shard.numel();
    }
  };
  // What a training step leaves behind before a checkpoint: its parameters
  // and optimizer state just written (here times 1: the same bits).
  const auto write_shards_in_place = [&] {
    for (const auto& shard : h5dcp_bench::local_shards(saved)) static_cast<void>(shard.mul_(1));
  };
  h5dcp::AsyncSaveOptions async_options;
  async_options.staging_bytes = staging_bytes(args, per_rank_bytes);
  // Repeated saves of one sharding reuse their plan, as CheckpointManager's
  // do (the peer enables DCP's plan caching for its async saves alike).
  h5dcp::SavePlanCache plan_cache;
  async_options.plan_cache = &plan_cache;
  const auto async_save = [&] { h5dcp::async_save(saved, args.dir + "/async.h5", async_options).get(); };
  // The small-tensor case: replicated 16 KiB tensors (each written once) vs
  // the same bytes in 4 row-sharded tensors.
  const std::int64_t small_elems = args.small_kib * 1024 / 4;
  const auto small = small_state(args.small_count, small_elems, true);
  std::int64_t large_rows = static_cast<std::int64_t>(args.small_count) * small_elems / kTensors / kCols;
  large_rows = std::max<std::int64_t>(size_, large_rows - large_rows % size_);
  const h5dcp_bench::BenchState large_state{large_rows, rank_, size_};
  auto large = large_state.make(0, true);
  const bool with_transformer = args.transformer.layers > 0;
  const auto transformer =
      with_transformer ? h5dcp_bench::transformer_state(args.transformer, rank_, size_, true) : h5dcp::StateDict{};

  // The first async save allocates and touches the staging memory, once for
  // the run: made here, untimed, so that no repetition includes it.
  if (!args.raw_only && !args.save_only && !args.load_only && !args.transformer_only && !args.baselines_only)
    async_save();

  std::map<std::string, std::vector<double>> t;
  // What the machine did during each repetition of the watched cases
  // (bench_conditions.hpp), beside t's seconds: the report sets a case's
  // slow repetitions against its fast ones.
  std::map<std::string, std::vector<std::string>> conditions;
  // Seconds waited for the VM's free page reporting to settle, before each
  // bare copy and async call of the timed repetitions.
  std::vector<double> reporting_settled;
  // Which of each sample's two copies ran first: the async call (true) or
  // the bare copy; they take turns (counted samples only, in order).
  std::vector<bool> async_call_first;
  h5dcp_bench::ConditionsWatch watch(args.dir);
  h5dcp_bench::ConditionsWatch blocking_watch(args.dir);  // the async call alone, inside its watched case
  // Starts an async save of the main case into async.h5 and returns its
  // future: `blocking`, this rank's seconds in the call; `c`, rank 0's
  // counters around the call alone (not the background write).
  const auto start_async_save = [&](double& blocking, h5dcp_bench::Conditions& c) {
    blocking_watch.start();
    const double t0 = now();
    auto future = h5dcp::async_save(saved, args.dir + "/async.h5", async_options);
    blocking = now() - t0;
    c = blocking_watch.stop(/*collective=*/false);
    return future;
  };
  const auto watched = [&](const std::string& key, auto&& fn) {
    h5dcp_bench::Conditions c;
    const double seconds = h5dcp_bench::timed_watched(watch, c, fn);
    t[key].push_back(seconds);
    conditions[key].push_back(h5dcp_bench::conditions_json(seconds, c));
  };
  bool correct = true;
  // Every timed async and staged save is read back, untimed, once its sample is done (not
  // between the call and its floor copy), into one set of targets zeroed each time: a fresh
  // allocation per read would free and fault memory that the next sample's copies then meet.
  bool async_correct = true;
  std::optional<h5dcp::StateDict> async_back;
  const auto read_back_async = [&](const std::string& path) {
    if (!async_back) async_back = state.make(0, false);
    for (const auto& shard : h5dcp_bench::local_shards(*async_back)) static_cast<void>(shard.zero_());
    h5dcp::load(*async_back, path);
    async_correct &= state.equal(*async_back, 0);
  };
  // The transformer case: a save, then loads warm and cold, each checked; the
  // same steps as the peer's case, as what a save follows costs it (memory
  // freed before it may have been handed back to a VM's host). Knobs are
  // measured in runs of their own (bench.sh: the cold load without read-ahead
  // hints with H5DCP_READAHEAD_MIB=0 set).
  const auto transformer_case = [&](int rep) {
    const auto path = args.dir + "/transformer.h5";
    fresh(path);
    mark("transformer", rep);
    watched("transformer_save", [&] { h5dcp::save(transformer, path); });
    // A timed load into fresh zeros (the page cache dropped first if `drop`), checked on every rank.
    const auto checked_load = [&](const char* key, bool drop) {
      drop_caches(drop);
      auto back = h5dcp_bench::transformer_state(args.transformer, rank_, size_, false);
      watched(key, [&] { h5dcp::load(back, path); });
      int ok = h5dcp_bench::transformer_holds_values(back, args.transformer, rank_, size_) ? 1 : 0;
      MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
      correct &= ok == 1;
    };
    checked_load("transformer_load", false);
    if (cold) checked_load("transformer_load_cold", true);
    fresh(path);  // 3.7 GB at the default shape: not left for the next case
  };
  // --transformer-layouts: what the one-file layout alone costs the
  // transformer's save. The same bytes written with POSIX calls and h5dcp's
  // tricks into one shared file (h5dcp's layout), into one file with a region
  // per rank (the same file and its lock, the ranks' rows not interleaved),
  // into a file per rank (the peer's), and into a file per rank with O_DIRECT
  // through a bounce buffer, checksummed (what a direct-I/O writer would
  // take; read back untimed); each after a page-cache drop (when
  // cold), as the transformer case's saves follow its cold loads; which comes
  // first rotates with the repetitions. A process of its own (bench.sh runs it
  // in each transformer round), so that the transformer case's saves keep
  // what comes before them.
  const auto layouts_case = [&](int rep) {
    const auto shared_path = args.dir + "/transformer-posix.bin";
    const auto own_path = args.dir + "/transformer-posix-rank" + std::to_string(rank_) + ".bin";
    const auto remove_posix_files = [&] {
      std::filesystem::remove(own_path);
      MPI_Barrier(MPI_COMM_WORLD);
      fresh(shared_path);  // and sync(): the disk settled after every removal
    };
    using h5dcp_bench::FileLayout;
    // The last: what a direct-I/O writer would take, in a file per rank
    // (bench_posix_baseline.hpp's direct_write_packed, XXH3 included).
    static constexpr const char* direct_key = "transformer_direct_per_rank";
    const std::vector<std::tuple<const char*, FileLayout, std::string>> layouts{
        {"transformer_posix_shared", FileLayout::kInterleaved, shared_path},
        {"transformer_posix_regions", FileLayout::kRankRegions, shared_path},
        {"transformer_posix_per_rank", FileLayout::kFilePerRank, own_path},
        {direct_key, FileLayout::kFilePerRank, own_path}};
    remove_posix_files();
    for (std::size_t i = 0; i < layouts.size(); ++i) {
      drop_caches(cold);  // as the transformer case's saves come after its cold loads
      const auto& which = layouts[(i + static_cast<std::size_t>(rep + args.warmup)) % layouts.size()];
      const auto& file = std::get<2>(which);
      const auto ranges =
          h5dcp_bench::transformer_ranges(transformer, args.transformer, rank_, size_, std::get<1>(which));
      const bool direct = std::get<0>(which) == direct_key;
      watched(std::get<0>(which), [&] {
        if (direct)
          static_cast<void>(h5dcp_bench::direct_write_packed(file, ranges));
        else
          h5dcp_bench::posix_write(file, ranges, writeback_bytes());
      });
      // The direct writes are read back (untimed): a bounce buffer's bookkeeping can go wrong.
      if (direct) {
        int ok = h5dcp_bench::file_holds(file, ranges) ? 1 : 0;
        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        correct &= ok == 1;
      }
      remove_posix_files();
    }
  };
  for (int rep = -args.warmup; rep < args.reps; ++rep) {
    if (rep == 0) {  // the warm-up repetitions are not counted (their checks are)
      t.clear();
      conditions.clear();
      reporting_settled.clear();
      async_call_first.clear();
    }
    if (args.transformer_only) {
      if (args.layouts_only)
        layouts_case(rep);
      else
        transformer_case(rep);
      continue;
    }
    if (args.baselines_only) {
      // The baselines the save's targets are judged against, timed where the save sits: bench.sh
      // runs this process in its alternated rounds beside the save's and the peer's, so that all
      // meet the disk in the same state; each from a settled disk, taking turns going first.
      const auto ranges = file_ranges(saved, rows);
      const auto path = args.dir + "/baseline.bin";
      const auto published = args.dir + "/baseline-published.bin";
      const std::vector<std::pair<std::string, std::function<void()>>> baselines{
          {"raw", [&] { raw_write(path, saved, rows, true); }},
          {"raw_independent", [&] { raw_write(path, saved, rows, false); }},
          {"posix_write", [&] { h5dcp_bench::posix_write(path, ranges, writeback_bytes()); }},
          {"posix_checkpoint", [&] {  // what h5dcp's save adds besides HDF5 and MPI-IO, as in the main run
             static_cast<void>(h5dcp_bench::posix_write(path, ranges, writeback_bytes(), /*hash=*/true));
             MPI_Barrier(MPI_COMM_WORLD);
             if (rank_ == 0) h5dcp_bench::publish(path, published);
           }}};
      for (std::size_t i = 0; i < baselines.size(); ++i) {
        const auto& [key, write] = baselines[(i + static_cast<std::size_t>(rep + args.warmup)) % baselines.size()];
        fresh(path);
        fresh(published);
        watched(key, write);
      }
      fresh(path);
      fresh(published);
      continue;
    }
    if (!args.no_raw) {
      fresh(args.dir + "/raw.bin");
      watched("raw", [&] { raw_write(args.dir + "/raw.bin", saved, rows, true); });
      fresh(args.dir + "/raw.bin");
      watched("raw_independent", [&] { raw_write(args.dir + "/raw.bin", saved, rows, false); });
    }
    if (args.raw_only) continue;
    if (args.async_only) {
      fresh(args.dir + "/async.h5");
      mark("async save", rep);
      watched("async_total", async_save);
      read_back_async(args.dir + "/async.h5");
      continue;
    }
    h5dcp::SaveOptions save_options;
    if (args.independent) save_options.io_mode = h5dcp::IoMode::Independent;
    fresh(ckpt);
    mark("sync save", rep);
    if (args.load_only)
      h5dcp::save(saved, ckpt, save_options);  // what the loads read, untimed
    else
      watched("save", [&] { h5dcp::save(saved, ckpt, save_options); });
    if (args.save_only) {
      // Every save read back untimed (the peer's --save-only reads back each of its own too): the
      // figure of a save that wrote wrong bytes is refused by the report.
      auto back = state.make(0, false);
      h5dcp::load(back, ckpt);
      correct &= state.equal(back, 0);
      continue;
    }
    // Warm: the file the save just wrote is in the page cache; cold: dropped.
    for (const bool drop : {false, true}) {
      if (drop && !cold) continue;
      const std::string suffix = drop ? "_cold" : "";
      drop_caches(drop);
      auto same = state.make(0, false);
      watched("load" + suffix, [&] { h5dcp::load(same, ckpt); });
      correct &= state.equal(same, 0);
      drop_caches(drop);
      auto shifted = state.make(size_ > 1 ? 1 : 0, false);
      watched("reshard" + suffix, [&] { h5dcp::load(shifted, ckpt); });
      correct &= state.equal(shifted, size_ > 1 ? 1 : 0);
    }
    if (args.load_only) {
      // The cold POSIX read of the same bytes in the same rounds (the cold
      // loads' targets are taken against it, not against the main run's
      // one read): the file written untimed, read cold, removed.
      if (cold) {
        const auto ranges = file_ranges(saved, rows);
        const auto posix_path = args.dir + "/posix.bin";
        fresh(posix_path);
        static_cast<void>(h5dcp_bench::posix_write(posix_path, ranges, writeback_bytes()));
        drop_caches(true);
        watched("posix_read_cold", [&] { h5dcp_bench::posix_read(posix_path, ranges); });
        fresh(posix_path);
      }
      continue;
    }
    // The read-ahead hints' knob, measured: the cold load without them.
    if (cold) {
      without_read_ahead([&] {
        drop_caches(true);
        auto same = state.make(0, false);
        t["load_cold_no_readahead"].push_back(timed([&] { h5dcp::load(same, ckpt); }));
        correct &= state.equal(same, 0);
      });
    }
    // The POSIX limits, on the same bytes: h5dcp's tricks, O_DIRECT, reads.
    const auto ranges = file_ranges(saved, rows);
    const auto posix_path = args.dir + "/posix.bin";
    fresh(posix_path);
    watched("posix_write", [&] { h5dcp_bench::posix_write(posix_path, ranges, writeback_bytes()); });
    t["posix_read"].push_back(timed([&] { h5dcp_bench::posix_read(posix_path, ranges); }));
    if (cold) {
      drop_caches(true);
      watched("posix_read_cold", [&] { h5dcp_bench::posix_read(posix_path, ranges); });
    }
    // And past the page cache (cold whether or not it was dropped): whether
    // the page cache's copy is what bounds a cold read.
    drop_caches(cold);
    watched("direct_read", [&] {
      if (h5dcp_bench::direct_read(posix_path, ranges) != per_rank_bytes)
        throw std::runtime_error("direct_read: not every byte read");
    });
    fresh(posix_path);
    // The same write with what h5dcp's save adds besides HDF5 and MPI-IO: the
    // XXH3 checksum of every byte, and the atomic publish (a temporary name,
    // renamed once every rank's data is durable, then the directory fsync'd).
    const auto published = args.dir + "/posix-published.bin";
    fresh(published);
    watched("posix_checkpoint", [&] {
      static_cast<void>(h5dcp_bench::posix_write(posix_path, ranges, writeback_bytes(), /*hash=*/true));
      MPI_Barrier(MPI_COMM_WORLD);
      if (rank_ == 0) h5dcp_bench::publish(posix_path, published);
    });
    fresh(published);
    watched("direct_write", [&] { h5dcp_bench::direct_write(posix_path, ranges); });
    fresh(posix_path);
    // The async cases and their floors, `--async-samples` times per
    // repetition: each sample is a short event (tens of milliseconds) that a
    // busy host can stretch several-fold, and more samples keep the median
    // from following a few such moments.
    for (int sample = 0; sample < args.async_samples; ++sample) {
      // The floor under the blocking time: copying this rank's shards into
      // memory that is already touched, nothing else. The async call's file of
      // the last sample is removed first, so that both copies follow the
      // same frees, and both start once the VM has handed the memory freed
      // before them to its host (bench_conditions.hpp's settle_page_reporting):
      // one wait, then the two back to back, in turn first (whichever goes
      // first finds the source and the caches as the wait left them; taking
      // turns keeps that from landing on one side only).
      fresh(args.dir + "/async.h5");
      reporting_settled.push_back(h5dcp_bench::settle_page_reporting());
      // Touched again, untimed, before the copy: on a virtual machine the host
      // may take memory that has been left alone for a while (in a trial here
      // a copy into memory idle for 50 s took several times as long as one
      // into memory idle for 15 s, all of it user time, no fault in the guest),
      // and the target waits a sample between copies. The floor is the copy alone.
      copy_target.zero_();
      // And the shards written in place, untimed, as a training step writes
      // its parameters and optimizer state right before a checkpoint. Left
      // alone since the previous sample instead, the first copy to read them
      // ran about twice as long in a trial here whenever its target had been
      // left alone too, as the async call's staging memory is (measured below,
      // after the samples).
      write_shards_in_place();
      // Every other sample of the whole run, warm-up included, so that an odd
      // --async-samples does not give each repetition the same first turn.
      const bool call_first = ((rep + args.warmup) * args.async_samples + sample) % 2 == 1;
      const auto floor_copy = [&] { watched("staging_copy", [&] { copy_shards_into(copy_target); }); };
      double blocking = 0;
      h5dcp_bench::Conditions blocking_conditions;  // the call alone: rank 0's counters
      const auto async_call = [&] {
        mark("async save (background)", rep);
        watched("async_total", [&] { start_async_save(blocking, blocking_conditions).get(); });
      };
      if (call_first) {
        async_call();
        floor_copy();
      } else {
        floor_copy();
        async_call();
      }
      if (rep >= 0) async_call_first.push_back(call_first);
      // What the host's taking back of idle memory costs the same copy: the
      // async call's copy goes into memory left alone about as long.
      t["staging_copy_idle"].push_back(timed([&] { copy_shards_into(idle_target); }));
      blocking = h5dcp_bench::slowest(blocking);
      t["async_blocking"].push_back(blocking);
      conditions["async_blocking"].push_back(h5dcp_bench::conditions_json(blocking, blocking_conditions));
      // The blocking time's copy, as the engine timed it: what the call adds
      // beyond the copy, and whether the copy itself ran slower than the bare one.
      t["async_engine_copy"].push_back(h5dcp_bench::slowest(h5dcp::last_async_save_stats().staging_seconds));
      // Staging in the background, then a training step: compute (longer
      // than the copy), then the wait on `staged` before the optimizer step.
      const double compute = 2 * t["staging_copy"].back();
      double waits[2] = {0, 0};  // the call, the wait on `staged`
      fresh(args.dir + "/staged.h5");
      mark("staged in the background", rep);
      t["staged_total"].push_back(timed([&] {
        const double t0 = now();
        auto handles = h5dcp::async_stage_and_save(saved, args.dir + "/staged.h5", async_options);
        waits[0] = now() - t0;
        std::this_thread::sleep_for(std::chrono::duration<double>(compute));
        const double t1 = now();
        handles.staged.wait();
        waits[1] = now() - t1;
        handles.saved.get();
      }));
      for (double& wait : waits) wait = h5dcp_bench::slowest(wait);
      t["staged_blocking"].push_back(waits[0]);
      t["staged_wait"].push_back(waits[1]);
      t["staged_training_waited"].push_back(waits[0] + waits[1]);
      t["staged_compute"].push_back(compute);
      // The same copy as the async call's, on the staging thread while the
      // caller computes, into staging memory the async call wrote seconds
      // before (the call's staging memory has waited a sample; see the
      // bare copy's comment): another sample of the engine's copy beside the
      // floor.
      t["staged_engine_copy"].push_back(h5dcp_bench::slowest(h5dcp::last_async_save_stats().staging_seconds));
      read_back_async(args.dir + "/async.h5");
      read_back_async(args.dir + "/staged.h5");
    }
    // Once more per repetition, the async call alone with the shards left
    // alone since the previous sample (not written right before, as above),
    // first after the wait and the bare copy's touch: what writing them first
    // changes, measured in the same run rather than quoted from a trial.
    {
      fresh(args.dir + "/async.h5");
      reporting_settled.push_back(h5dcp_bench::settle_page_reporting());
      copy_target.zero_();
      MPI_Barrier(MPI_COMM_WORLD);
      double own_blocking = 0;
      h5dcp_bench::Conditions blocking_conditions;
      start_async_save(own_blocking, blocking_conditions).get();
      const double blocking = h5dcp_bench::slowest(own_blocking);
      t["async_blocking_shards_idle"].push_back(blocking);
      conditions["async_blocking_shards_idle"].push_back(h5dcp_bench::conditions_json(blocking, blocking_conditions));
      t["async_engine_copy_shards_idle"].push_back(
          h5dcp_bench::slowest(h5dcp::last_async_save_stats().staging_seconds));
      read_back_async(args.dir + "/async.h5");
    }
    const auto small_case = [&] {
      fresh(args.dir + "/small.h5");
      mark("small tensors", rep);
      watched("small", [&] { h5dcp::save(small, args.dir + "/small.h5"); });
      for (const bool drop : {false, true}) {
        if (drop && !cold) continue;
        drop_caches(drop);
        auto back = small_state(args.small_count, small_elems, false);
        t[drop ? "small_load_cold" : "small_load"].push_back(timed([&] { h5dcp::load(back, args.dir + "/small.h5"); }));
        correct &= check_small(back);
      }
    };
    const auto few_tensors_case = [&] {
      fresh(args.dir + "/large.h5");
      mark("same bytes in few tensors", rep);
      watched("small_as_large", [&] { h5dcp::save(large, args.dir + "/large.h5"); });
      // Loaded as the small tensors are, whole on every rank, warm and cold:
      // the same bytes read per rank, so the per-byte ratio compares like with
      // like (issue 51's small-tensor target); each load checked, the read-back.
      for (const bool drop : {false, true}) {
        if (drop && !cold) continue;
        drop_caches(drop);
        auto back = large_whole(large_state, false);
        t[drop ? "small_as_large_load_cold" : "small_as_large_load"].push_back(
            timed([&] { h5dcp::load(back, args.dir + "/large.h5"); }));
        correct &= equal_whole(large_state, back);
      }
    };
    // The two sides of the small-tensor target take turns going first (the
    // small tensors in even repetitions), so that neither always meets the
    // disk right after the other: what a save follows changes its time here.
    const bool small_first = rep % 2 == 0;
    if (small_first)
      small_case();
    else
      few_tensors_case();
    if (with_transformer) transformer_case(rep);
    if (small_first)
      few_tensors_case();
    else
      small_case();
    const auto floor_path = args.dir + "/hdf5-floor.h5";
    fresh(floor_path);
    t["small_hdf5_bare"].push_back(
        h5dcp_bench::hdf5_many_datasets_seconds(floor_path, args.small_count, small_elems, 0, MPI_COMM_WORLD));
    fresh(floor_path);
    t["small_hdf5_attrs"].push_back(
        h5dcp_bench::hdf5_many_datasets_seconds(floor_path, args.small_count, small_elems, 7, MPI_COMM_WORLD));
  }
  async_back.reset();
  // Every case ran (not one of the runs that measure a knob or a part). The memory a save or a
  // load adds is measured in processes of their own (--memory-only), not after all these cases.
  const bool full_run = !args.raw_only && !args.save_only && !args.load_only && !args.async_only &&
                        !args.transformer_only && !args.baselines_only;
  std::int64_t peak = status_bytes("VmHWM:");
  MPI_Allreduce(MPI_IN_PLACE, &peak, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);

  if (rank_ == 0 && args.transformer_only) {
    const double tgb = static_cast<double>(h5dcp_bench::transformer_bytes(args.transformer)) / 1e9;
    std::printf("h5dcp-bench: %d ranks, transformer only (%s; %d tensors, %.3f GB), %d reps, %s\n", size_,
                h5dcp_bench::describe(args.transformer).c_str(),
                h5dcp_bench::transformer_tensor_count(args.transformer), tgb, args.reps,
                args.layouts_only ? (correct ? "POSIX writes, the direct ones read back: equal" : "DIRECT WRITES WRONG")
                : correct         ? "every load checked: equal"
                                  : "LOADS WRONG");
    for (const auto& [key, seconds] : t)
      std::printf("%-40s %10.3f %10.3f GB/s\n", key.c_str(), median(seconds), tgb / median(seconds));
  }
  if (rank_ == 0) {
    const double raw = args.transformer_only || (args.no_raw && !args.baselines_only) ? 0.0 : median(t["raw"]);
    const double small_gb = static_cast<double>(args.small_count) * small_elems * 4 / 1e9;
    if (!args.transformer_only) {
      std::printf("h5dcp-bench: %d ranks, %d x [%lld, %lld] float32 = %.3f GB, %d reps (medians), fsync on, %s, %s\n",
                  size_, kTensors, static_cast<long long>(rows), static_cast<long long>(kCols), gb, args.reps,
                  cold ? "loads warm and cold (page cache dropped)" : "loads warm only (page cache not dropped)",
                  args.baselines_only ? "the baselines only: nothing to read back"
                  : correct           ? "every load checked: equal"
                                      : "LOADS WRONG");
      if (full_run || args.async_only)
        std::printf("h5dcp-bench: async checkpoints read back (every timed one): %s\n",
                    async_correct ? "equal" : "NOT EQUAL");
      std::printf("h5dcp-bench: async saves planned %lld times, reused the plan %lld times\n",
                  static_cast<long long>(plan_cache.planned()), static_cast<long long>(plan_cache.reused()));
      std::printf("%-28s %10s %10s %14s\n", "case", "seconds", "GB/s", "vs raw write");
      auto row = [&](const char* name, double seconds, double bytes_gb) {
        if (raw > 0)
          std::printf("%-28s %10.3f %10.3f %14.2f\n", name, seconds, bytes_gb / seconds,
                      (bytes_gb / seconds) / (gb / raw));
        else  // --no-raw
          std::printf("%-28s %10.3f %10.3f %14s\n", name, seconds, bytes_gb / seconds, "-");
      };
      if (!args.no_raw || args.baselines_only) {
        row("raw MPI-IO write + sync", raw, gb);
        row("raw, independent writes", median(t["raw_independent"]), gb);
      }
      if (full_run || args.baselines_only) {
        row("POSIX pwrite + fsync", median(t["posix_write"]), gb);
        row("  + XXH3, published", median(t["posix_checkpoint"]), gb);
        if (full_run) row("O_DIRECT write + fsync", median(t["direct_write"]), gb);
      }
      if (!args.raw_only && !args.async_only && !args.baselines_only && !args.load_only)
        row("h5dcp save", median(t["save"]), gb);
      if (args.load_only)
        for (const auto& [key, name] :
             std::vector<std::pair<std::string, std::string>>{{"load", "h5dcp load"},
                                                              {"reshard", "h5dcp resharded load"},
                                                              {"load_cold", "h5dcp load, cold"},
                                                              {"reshard_cold", "h5dcp resharded load, cold"},
                                                              {"posix_read_cold", "POSIX read, cold"}})
          if (t.count(key) != 0) row(name.c_str(), median(t.at(key)), gb);
      if (args.async_only) row("h5dcp async save (total)", median(t["async_total"]), gb);
      if (full_run) {
        row("h5dcp load", median(t["load"]), gb);
        row("h5dcp resharded load", median(t["reshard"]), gb);
        row("POSIX read (pread 16 MiB)", median(t["posix_read"]), gb);
        row("O_DIRECT read (cold)", median(t["direct_read"]), gb);
        if (cold) {
          row("h5dcp load, cold", median(t["load_cold"]), gb);
          row("h5dcp resharded load, cold", median(t["reshard_cold"]), gb);
          row("  cold, no read-ahead hints", median(t["load_cold_no_readahead"]), gb);
          row("POSIX read, cold", median(t["posix_read_cold"]), gb);
        }
        row("h5dcp async save (total)", median(t["async_total"]), gb);
        std::printf("%-28s %10.3f %10s %13.1f%%  of the sync save\n", "h5dcp async save (blocking)",
                    median(t["async_blocking"]), "", 100 * median(t["async_blocking"]) / median(t["save"]));
        std::printf("%-28s %10.3f %10.3f %13.1f%%  of the sync save (the floor)\n", "memory copy of the shards",
                    median(t["staging_copy"]), gb / median(t["staging_copy"]),
                    100 * median(t["staging_copy"]) / median(t["save"]));
        std::printf("%-28s %10.3f %10.3f %14s\n", "async, staged in background", median(t["staged_total"]),
                    gb / median(t["staged_total"]), "(total)");
        std::printf(
            "%-28s %10.4f %10s %13.2f%%  of the sync save (call %.4f s + wait %.4f s after %.3f s of compute)\n",
            "  training waited", median(t["staged_training_waited"]), "",
            100 * median(t["staged_training_waited"]) / median(t["save"]), median(t["staged_blocking"]),
            median(t["staged_wait"]), median(t["staged_compute"]));
        std::printf("%-28s %10.3f %10.3f %14s\n", (std::to_string(args.small_count) + " small tensors save").c_str(),
                    median(t["small"]), small_gb / median(t["small"]), "");
        std::printf("%-28s %10.3f %10.3f\n", "  loaded on every rank", median(t["small_load"]),
                    size_ * small_gb / median(t["small_load"]));
        if (cold)
          std::printf("%-28s %10.3f %10.3f\n", "  loaded, cold", median(t["small_load_cold"]),
                      size_ * small_gb / median(t["small_load_cold"]));
        std::printf("%-28s %10.3f %10.3f %13.2fx  small / large\n", "same bytes in 4 tensors",
                    median(t["small_as_large"]), small_gb / median(t["small_as_large"]),
                    median(t["small"]) / median(t["small_as_large"]));
        std::printf("%-28s %10.3f %10.3f %13.2fx  small / large\n", "  loaded on every rank",
                    median(t["small_as_large_load"]), size_ * small_gb / median(t["small_as_large_load"]),
                    median(t["small_load"]) / median(t["small_as_large_load"]));
        if (cold)
          std::printf("%-28s %10.3f %10.3f %13.2fx  small / large\n", "  loaded, cold",
                      median(t["small_as_large_load_cold"]), size_ * small_gb / median(t["small_as_large_load_cold"]),
                      median(t["small_load_cold"]) / median(t["small_as_large_load_cold"]));
        for (const auto& [key, name] :
             {std::pair<std::string, const char*>{"small_hdf5_bare", "HDF5 alone, no attributes"},
              {"small_hdf5_attrs", "HDF5 alone, 7 attributes"}})
          std::printf("%-28s %10.3f %10.3f %13.2fx  / large (the floor)\n", name, median(t[key]),
                      small_gb / median(t[key]), median(t[key]) / median(t["small_as_large"]));
        if (with_transformer) {
          const double tgb = static_cast<double>(h5dcp_bench::transformer_bytes(args.transformer)) / 1e9;
          std::printf("transformer (%s; %d tensors, %.3f GB):\n", h5dcp_bench::describe(args.transformer).c_str(),
                      h5dcp_bench::transformer_tensor_count(args.transformer), tgb);
          row("  save", median(t["transformer_save"]), tgb);
          row("  load", median(t["transformer_load"]), tgb);
          if (cold) row("  load, cold", median(t["transformer_load_cold"]), tgb);
        }
      }
    }
    if (!args.json.empty()) {
      const auto settle_bounds = h5dcp_bench::reporting_settle_bounds();
      std::ofstream out(args.json);
      out << "{\n  \"ranks\": " << size_ << ",\n  \"gb\": " << gb << ",\n  \"small_gb\": " << small_gb
          << ",\n  \"small_as_large_gb\": " << large_state.gb() << ",\n  \"cold\": " << (cold ? "true" : "false")
          << ",\n  \"page_reporting_order\": " << h5dcp_bench::page_reporting_order()
          << ",\n  \"largest_page_order\": " << h5dcp_bench::largest_page_order()
          << ",\n  \"reporting_settle_bounds\": [" << settle_bounds[0] << ", " << settle_bounds[1] << "]"
          << ",\n  \"reporting_settle_allowance_mib\": " << h5dcp_bench::kReportingSettleAllowanceMib
          << ",\n  \"reporting_settled_seconds\": [";
      for (std::size_t k = 0; k < reporting_settled.size(); ++k) out << (k ? ", " : "") << reporting_settled[k];
      out << "],\n  \"async_call_first\": [";
      for (std::size_t k = 0; k < async_call_first.size(); ++k)
        out << (k ? ", " : "") << (async_call_first[k] ? "true" : "false");
      out << "]"
          << ",\n  \"small_count\": " << args.small_count << ",\n  \"small_kib\": " << args.small_kib
          << ",\n  \"transformer\": "
          << (with_transformer
                  ? "{\"shape\": \"" + h5dcp_bench::describe(args.transformer) +
                        "\", \"tensors\": " + std::to_string(h5dcp_bench::transformer_tensor_count(args.transformer)) +
                        ", \"bytes\": " + std::to_string(h5dcp_bench::transformer_bytes(args.transformer)) + "}"
                  : std::string("null"))
          << ",\n  \"reps\": " << args.reps << ",\n  \"warmup_reps\": " << args.warmup
          << ",\n  \"async_samples\": " << args.async_samples << ",\n  \"correct\": " << (correct ? "true" : "false")
          << ",\n  \"async_correct\": " << (full_run || args.async_only ? (async_correct ? "true" : "false") : "null")
          << ",\n  \"peak_rss_bytes\": " << peak << ",\n  \"shard_bytes\": " << per_rank_bytes
          << ",\n  \"staging_bytes\": " << h5dcp::last_async_save_stats().staging_bytes
          << ",\n  \"async_plans\": {\"planned\": " << plan_cache.planned() << ", \"reused\": " << plan_cache.reused()
          << "},\n  \"mpi_io\": \"" << (std::getenv("OMPI_MCA_io") ? std::getenv("OMPI_MCA_io") : "default") << "\"";
      h5dcp_bench::json_object(out, "median_seconds", t, [&](const std::vector<double>& v) { out << median(v); });
      // Every repetition too, in order: the report shows their spread.
      h5dcp_bench::json_object(out, "seconds", t, [&](const std::vector<double>& v) {
        out << "[";
        for (std::size_t k = 0; k < v.size(); ++k) out << (k ? ", " : "") << v[k];
        out << "]";
      });
      // What the machine did during each repetition of the watched cases.
      h5dcp_bench::json_object(out, "conditions", conditions, [&](const std::vector<std::string>& v) {
        out << "[";
        for (std::size_t k = 0; k < v.size(); ++k) out << (k ? ",\n      " : "\n      ") << v[k];
        out << "]";
      });
      out << "\n}\n";
    }
  }
  h5dcp::finish_async_saves();
  MPI_Finalize();
  return correct && async_correct ? 0 : 1;
}
