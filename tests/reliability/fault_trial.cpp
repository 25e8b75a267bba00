// One reliability trial, driven by tests/reliability/reliability.py:
//
//   fault_trial save  DIR MIB SPEC TIMEOUT [LAYOUT]  (mpiexec) save generation 1 to DIR/ckpt.h5,
//                                           then generation 2 with H5DCP_INJECT_FAULT=SPEC
//   fault_trial load  DIR MIB SPEC TIMEOUT [LAYOUT]  (mpiexec) save generation 1, then load it with SPEC
//   fault_trial loop  DIR MIB               (mpiexec) save generations 1, 2, 3, ... until killed;
//                                           each rank prints {"rank": r, "saving": g} as it starts save g
//   fault_trial check DIR MIB               (1 process) what DIR/ckpt.h5 holds now, then
//                                           whether the next save cleans up what is left
//   fault_trial flips FILE MIB SEED FIRST COUNT  (1 process) byte flips of a saved file
//   fault_trial nodeloss DIR MIB LOST REPLICAS  (mpiexec, one rank per faked node "node-a", "node-b", ...)
//                                           a CheckpointManager with a node-local tier (REPLICAS copies)
//                                           saves generations 1-3 (the shared directory gets 2), the
//                                           nodes LOST ("a,c", or "none") lose their local directories,
//                                           and a job on the survivors and fresh nodes loads; rank 0
//                                           prints where it recovered from and whether bit for bit
//
// LAYOUT is how the weights are sharded: "rows" (default: every block is one
// contiguous range of the file, so h5dcp writes it independently) or
// "columns" (blocks scattered through the file: written collectively, inside
// HDF5's collective write where no deadline reaches).
// Every line printed is one JSON object for the driver. Generation g's data
// is a pure function of g, so a check tells exactly which save it holds.

#include <hdf5.h>
#include <mpi.h>

#include <ATen/ops/arange.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "h5dcp/h5dcp.hpp"
#include "storage/deferred_removal.hpp"

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kCols = 1024;

int rank_of() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int size_of() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::int64_t rows_for(int mib) { return std::int64_t{mib} * 256; }  // float32 rows of 4 KiB

at::Tensor weights(std::int64_t rows, int gen) {
  return at::arange(rows * kCols, at::kFloat).reshape({rows, kCols}).mul_(0.5).add_(gen);
}

// This rank's shards of generation `gen`'s weights, sharded by rows or by columns.
std::vector<h5dcp::Shard> weight_shards(std::int64_t rows, int gen, const std::string& layout) {
  if (layout != "rows" && layout != "columns") throw std::invalid_argument("unknown layout '" + layout + "'");
  const bool by_rows = layout == "rows";
  const auto dim = by_rows ? 0 : 1;
  const auto length = by_rows ? rows : kCols;
  // Even cuts along `dim`, like torch.chunk: the last ranks may get fewer.
  const auto per_rank = (length + size_of() - 1) / size_of();
  const auto begin = std::min(length, per_rank * rank_of());
  const auto count = std::min(length, begin + per_rank) - begin;
  std::vector<h5dcp::Shard> shards;
  if (count <= 0) return shards;
  std::vector<std::int64_t> offsets{0, 0};
  offsets[static_cast<std::size_t>(dim)] = begin;
  shards.push_back({weights(rows, gen).narrow(dim, begin, count).clone(), offsets});
  return shards;
}

// Generation `gen` as this rank holds it: the weights sharded, the rest replicated.
h5dcp::StateDict state(int mib, int gen, const std::string& layout = "rows") {
  const auto rows = rows_for(mib);
  return h5dcp::StateDict{
      {"model", h5dcp::StateDict{{"w", h5dcp::ShardedTensor({rows, kCols}, weight_shards(rows, gen, layout))},
                                 {"b", at::full({kCols}, static_cast<float>(gen))}}},
      {"step", std::int64_t{gen}},
      {"note", "generation " + std::to_string(gen)}};
}

h5dcp::StateDict empty_target(int mib) {
  return h5dcp::StateDict{
      {"model", h5dcp::StateDict{{"w", at::zeros({rows_for(mib), kCols})}, {"b", at::zeros({kCols})}}},
      {"step", std::int64_t{0}},
      {"note", std::string()}};
}

bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<std::size_t>(a.nbytes())) == 0;
}

// The generation a loaded target holds, or -1 when it is not exactly one.
int generation_of(const h5dcp::StateDict& loaded, int mib) {
  const auto gen = static_cast<int>(std::get<std::int64_t>(h5dcp::value_at(loaded, "step")));
  const bool exact =
      same_bits(std::get<at::Tensor>(h5dcp::value_at(loaded, "model/w")), weights(rows_for(mib), gen)) &&
      same_bits(std::get<at::Tensor>(h5dcp::value_at(loaded, "model/b")), at::full({kCols}, static_cast<float>(gen))) &&
      std::get<std::string>(h5dcp::value_at(loaded, "note")) == "generation " + std::to_string(gen);
  return exact ? gen : -1;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// This rank's outcome of an attempt, as the driver reads it.
void report(const char* what, const std::string& error_step, const std::string& message, const std::string& failing) {
  std::printf("{\"rank\": %d, \"attempt\": \"%s\", \"error\": %s, \"step\": %s, \"failing\": [%s]}\n", rank_of(), what,
              message.empty() ? "null" : json_string(message).c_str(), json_string(error_step).c_str(),
              failing.c_str());
  std::fflush(stdout);
}

// After a deadline expired the communicator is unusable and HDF5 still holds
// the abandoned file (closing it is collective): the process must end
// without MPI_Finalize, whose HDF5 cleanup would try to close it. That is
// what "the job should be restarted" in the error asks of a program.
// The other ranks get time to report before this process ends, since
// mpiexec ends the whole job when one process exits unfinalized: this one
// timed out at least one deadline into the step; a stalled rank wakes up
// after its stall (the longest in SPEC) and gives up within 2 * deadline +
// 1 s of arriving. Hence the stall, a deadline, 1 s and 6 s for the stalled
// rank's remaining work and report (12 s with the driver's 4 s stall past a
// 1 s deadline; longer where the driver scales both for a slow build).
double g_linger = 12;

[[noreturn]] void end_after_timeout() {
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(g_linger));
  std::_Exit(0);
}

double linger_for(const std::string& spec, double timeout) {
  double stall = 0;
  for (auto at = spec.find('~'); at != std::string::npos; at = spec.find('~', at + 1))
    stall = std::max(stall, std::strtod(spec.c_str() + at + 1, nullptr));
  return stall + std::max(timeout, 0.0) + 1 + 6;
}

template <typename Fn>
void attempt(const char* what, Fn&& fn) {
  try {
    fn();
    report(what, "", "", "");
  } catch (const h5dcp::CheckpointError& e) {
    std::string failing;
    for (const auto& [r, m] : e.failures()) failing += (failing.empty() ? "" : ", ") + std::to_string(r);
    report(what, e.step(), e.what(), failing);
    if (std::string(e.what()).find("the job should be restarted") != std::string::npos) end_after_timeout();
  } catch (const std::exception& e) {
    report(what, "(not a CheckpointError)", e.what(), "");
  }
}

int run_save_or_load(bool load, const std::string& dir, int mib, const std::string& spec, double timeout,
                     const std::string& layout) {
  const auto path = dir + "/ckpt.h5";
  // Progress before the fault, so that a trial that hangs says how far it got.
  std::printf("{\"rank\": %d, \"progress\": \"saving generation 1\"}\n", rank_of());
  std::fflush(stdout);
  h5dcp::save(state(mib, 1, layout), path);
  MPI_Barrier(MPI_COMM_WORLD);
  std::printf("{\"rank\": %d, \"progress\": \"generation 1 saved\"}\n", rank_of());
  std::fflush(stdout);
  ::setenv("H5DCP_INJECT_FAULT", spec.c_str(), 1);
  g_linger = linger_for(spec, timeout);
  if (load) {
    h5dcp::LoadOptions options;
    options.timeout_seconds = timeout;
    auto target = empty_target(mib);
    attempt("load", [&] { h5dcp::load(target, path, options); });
  } else {
    h5dcp::SaveOptions options;
    options.timeout_seconds = timeout;
    attempt("save", [&] { h5dcp::save(state(mib, 2, layout), path, options); });
  }
  ::unsetenv("H5DCP_INJECT_FAULT");
  return 0;
}

int run_loop(const std::string& dir, int mib) {
  const auto path = dir + "/ckpt.h5";
  h5dcp::save(state(mib, 1), path);
  { std::ofstream(dir + "/pid." + std::to_string(rank_of())) << ::getpid() << "\n"; }
  MPI_Barrier(MPI_COMM_WORLD);
  for (int gen = 2; gen < 1000; ++gen) {
    // The driver checks that a kill landed inside a save, and that the path
    // then holds the save in progress or the one before it.
    std::printf("{\"rank\": %d, \"saving\": %d}\n", rank_of(), gen);
    std::fflush(stdout);
    h5dcp::save(state(mib, gen), path);
  }
  return 0;
}

std::vector<std::string> leftovers(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) {
    const auto name = e.path().filename().string();
    if (name != "ckpt.h5" && name.rfind("pid.", 0) != 0) names.push_back(name);
  }
  return names;
}

std::string json_list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (const auto& n : names) out += (out.size() > 1 ? ", " : "") + json_string(n);
  return out + "]";
}

// What DIR/ckpt.h5 is now, and whether the next save leaves nothing behind.
int run_check(const std::string& dir, int mib) {
  const auto path = dir + "/ckpt.h5";
  int gen = 0;  // 0: no file
  std::string error;
  if (fs::exists(path)) {
    try {
      auto target = empty_target(mib);
      h5dcp::load(target, path);
      gen = generation_of(target, mib);
    } catch (const std::exception& e) {
      gen = -1;
      error = e.what();
    }
  }
  const auto before = leftovers(dir);
  h5dcp::save(state(mib, 99), path);
  // The checkpoint that save replaced is removed by a background thread
  // (storage/deferred_removal.hpp): what is left is what remains once it is done.
  h5dcp::detail::finish_background_removals();
  const auto after = leftovers(dir);
  std::printf("{\"generation\": %d, \"error\": %s, \"leftovers\": %s, \"after_next_save\": %s}\n", gen,
              error.empty() ? "null" : json_string(error).c_str(), json_list(before).c_str(), json_list(after).c_str());
  return 0;
}

// [begin, end) byte ranges of the file that hold tensor or value data.
std::vector<std::pair<std::int64_t, std::int64_t>> data_ranges(const std::string& file) {
  std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
  const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  H5Ovisit(
      f, H5_INDEX_NAME, H5_ITER_NATIVE,
      [](hid_t root, const char* name, const H5O_info_t* info, void* out) -> herr_t {
        if (info->type != H5O_TYPE_DATASET) return 0;
        const hid_t d = H5Dopen2(root, name, H5P_DEFAULT);
        const haddr_t offset = H5Dget_offset(d);
        if (offset != HADDR_UNDEF)
          static_cast<std::vector<std::pair<std::int64_t, std::int64_t>>*>(out)->emplace_back(
              offset, offset + H5Dget_storage_size(d));
        H5Dclose(d);
        return 0;
      },
      &ranges);
  H5Fclose(f);
  return ranges;
}

// Flips one random byte per trial, alternately inside the data and in the
// rest of the file (superblock, object headers, attributes, heaps), and
// loads the damaged copy: it must fail or load exactly what the intact one holds.
int run_flips(const std::string& file, int mib, unsigned seed, int first, int count) {
  std::ifstream in(file, std::ios::binary);
  const std::string original((std::istreambuf_iterator<char>(in)), {});
  const auto ranges = data_ranges(file);
  auto in_data = [&](std::int64_t at) {
    for (const auto& [b, e] : ranges)
      if (at >= b && at < e) return true;
    return false;
  };
  // The generation the intact file holds: what every load must give or refuse.
  auto intact = empty_target(mib);
  h5dcp::load(intact, file);
  const int expected = generation_of(intact, mib);
  if (expected < 1) throw std::runtime_error("the file to flip bytes in does not load as a generation");
  const auto damaged = file + ".flipped";
  for (int trial = first; trial < first + count; ++trial) {
    std::mt19937_64 random(seed * 1000003ULL + static_cast<unsigned>(trial));
    const bool want_data = trial % 2 == 0;
    std::int64_t at = 0;
    do {
      at = static_cast<std::int64_t>(random() % original.size());
    } while (in_data(at) != want_data);
    const auto mask = static_cast<char>(1 + random() % 255);
    auto bytes = original;
    bytes[static_cast<std::size_t>(at)] ^= mask;
    {
      std::ofstream(damaged, std::ios::binary | std::ios::trunc)
          .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    std::string outcome;
    std::string message;
    try {
      auto target = empty_target(mib);
      h5dcp::load(target, damaged);
      outcome = generation_of(target, mib) == expected ? "identical" : "WRONG";
    } catch (const h5dcp::Error& e) {
      outcome = "error";
      message = e.what();
    } catch (const std::exception& e) {
      outcome = "other exception";
      message = e.what();
    }
    std::printf("{\"trial\": %d, \"offset\": %lld, \"region\": \"%s\", \"outcome\": \"%s\", \"message\": %s}\n", trial,
                static_cast<long long>(at), want_data ? "data" : "metadata", outcome.c_str(),
                json_string(message.substr(0, 200)).c_str());
    std::fflush(stdout);
  }
  fs::remove(damaged);
  return 0;
}

// The node-local tier's node-loss trial (see the top of the file).
int run_nodeloss(const std::string& dir, int mib, const std::string& lost, int replicas) {
  const auto node = [](int rank) { return std::string("node-") + static_cast<char>('a' + rank); };
  const auto is_lost = [&](int rank) {
    return lost != "none" &&
           ("," + lost + ",").find("," + std::string(1, static_cast<char>('a' + rank)) + ",") != std::string::npos;
  };
  h5dcp::LocalTierOptions tier;
  tier.directory = dir + "/local/{node}";
  tier.replicas = replicas;
  tier.drain_every_steps = 2;
  tier.run_id = "nodeloss";
  ::setenv("H5DCP_NODE_NAME", node(rank_of()).c_str(), 1);
  {
    h5dcp::CheckpointManager manager(dir + "/shared", {}, MPI_COMM_WORLD, h5dcp::ManagerOptions{0, tier});
    for (int gen = 1; gen <= 3; ++gen) manager.save(gen, state(mib, gen));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_of() == 0)
    for (int r = 0; r < size_of(); ++r)
      if (is_lost(r)) fs::remove_all(dir + "/local/" + node(r));
  MPI_Barrier(MPI_COMM_WORLD);
  // The recovering job: a lost node's rank runs on a fresh node.
  ::setenv("H5DCP_NODE_NAME", (is_lost(rank_of()) ? "fresh-" + std::to_string(rank_of()) : node(rank_of())).c_str(), 1);
  h5dcp::CheckpointManager manager(dir + "/shared", {}, MPI_COMM_WORLD, h5dcp::ManagerOptions{0, tier});
  auto target = empty_target(mib);
  const auto found = manager.load(target);
  int exact = found && generation_of(target, mib) == static_cast<int>(found->step) ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &exact, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank_of() == 0) {
    const auto& scan = manager.last_scan();
    std::printf("{\"from\": \"%s\", \"step\": %lld, \"exact\": %s, \"skipped\": %zu, \"rejected\": %s}\n",
                !found         ? "none"
                : found->local ? "local"
                               : "shared",
                found ? static_cast<long long>(found->step) : -1LL, exact ? "true" : "false", scan.local.skipped.size(),
                json_string(scan.local.rejected.empty() ? std::string() : scan.local.rejected.front()).c_str());
    std::fflush(stdout);
  }
  return exact ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rc = 2;
  const std::vector<std::string> a(argv + 1, argv + argc);
  try {
    if ((a.size() == 5 || a.size() == 6) && (a[0] == "save" || a[0] == "load"))
      rc =
          run_save_or_load(a[0] == "load", a[1], std::stoi(a[2]), a[3], std::stod(a[4]), a.size() == 6 ? a[5] : "rows");
    else if (a.size() == 3 && a[0] == "loop")
      rc = run_loop(a[1], std::stoi(a[2]));
    else if (a.size() == 3 && a[0] == "check")
      rc = run_check(a[1], std::stoi(a[2]));
    else if (a.size() == 5 && a[0] == "nodeloss")
      rc = run_nodeloss(a[1], std::stoi(a[2]), a[3], std::stoi(a[4]));
    else if (a.size() == 6 && a[0] == "flips")
      rc = run_flips(a[1], std::stoi(a[2]), static_cast<unsigned>(std::stoul(a[3])), std::stoi(a[4]), std::stoi(a[5]));
    else
      std::fprintf(stderr, "usage: see the top of tests/reliability/fault_trial.cpp\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fault_trial: %s\n", e.what());
    rc = 3;
  }
  MPI_Finalize();
  return rc;
}
