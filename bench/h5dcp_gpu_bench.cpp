// h5dcp-gpu-bench: h5dcp on GPU tensors, beside the copies that bound it, in
// one run (scripts/gpu-bench.sh runs PyTorch's DCP on the same data next).
//
//   mpiexec -n 2 h5dcp-gpu-bench [--gib 4] [--reps 3] [--dir DIR] [--no-cold] [--json FILE]
//
// Each rank's tensors live on its GPU (assign_device(): ranks may share
// one): 4 float32 tensors [rows, 4096], row-sharded, h5dcp-bench's values.
// One untimed warm-up repetition first, then medians over the repetitions;
// every save is durable (fsync):
//   d2h        the floor under staging: copying the shards into pinned host
//              memory allocated beforehand (cudaMemcpyAsync, then a wait)
//   h2d        the same bytes back to the GPU from pinned memory
//   save       h5dcp::save
//   load       h5dcp::load into GPU tensors, same sharding (and resharded:
//              every rank loads another rank's rows); warm, and cold when
//              root may drop the page cache
//   async      h5dcp::async_save: how long the caller blocks, and the total
//   staged     h5dcp::async_stage_and_save inside a training step: the call,
//              then the step's forward and backward (matrix products on the
//              GPU, queued for about 2 x the d2h time), then the wait on
//              `staged` and the optimizer step (an in-place add); the time the
//              training waited, the step's time against a step without a
//              save, and how long staging took
// Every load and every async checkpoint (each repetition's) is checked bit for bit.

#include <ATen/ATen.h>
#include <mpi.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "bench_mpi_timing.hpp"
#include "bench_state.hpp"
#include "h5dcp/h5dcp.hpp"
#include "h5dcp/training/device.hpp"

namespace {

using h5dcp_bench::BenchState;
using h5dcp_bench::drop_caches;
using h5dcp_bench::fresh;
using h5dcp_bench::median;
using h5dcp_bench::now;
using h5dcp_bench::slowest;
using h5dcp_bench::timed;

int rank_ = 0;
int size_ = 1;
BenchState state_;  // its device: this rank's GPU

// Waits for everything queued on this rank's GPU (a scalar read back).
void settle_gpu() { (void)at::zeros({1}, at::TensorOptions().device(state_.device)).sum().item<float>(); }

// A training step's forward and backward: `products` matrix products queued
// on the GPU (not waited for).
void queue_compute(const at::Tensor& a, const at::Tensor& b, int products) {
  for (int k = 0; k < products; ++k) (void)at::mm(a, b);
}

}  // namespace

int main(int argc, char** argv) {
  h5dcp_bench::CommonArgs args{4.0, 3, "/tmp/h5dcp-gpu-bench"};
  const int usage = h5dcp_bench::parse_args(
      argc, argv, args,
      "usage: mpiexec -n N h5dcp-gpu-bench [--gib G] [--reps R] [--warmup W] [--dir DIR] [--no-cold]\n"
      "                                     [--json FILE]\n",
      [](const std::string&, const auto&) { return false; });
  if (usage >= 0) return usage;
  std::tie(rank_, size_) = h5dcp_bench::start_mpi(argc, argv);
  const auto assignment = h5dcp::assign_device();
  for (const auto& line : h5dcp::gather_device_descriptions(assignment))
    std::printf("h5dcp-gpu-bench: %s\n", line.c_str());
  state_ = {BenchState::rows_for(args.gib, size_), rank_, size_, c10::Device(assignment.choice.device())};
  const auto& device = state_.device;
  if (!device.is_cuda()) {
    if (rank_ == 0) std::fprintf(stderr, "h5dcp-gpu-bench: no GPU (%s)\n", assignment.choice.summary().c_str());
    MPI_Finalize();
    return 2;
  }
  if (rank_ == 0) std::filesystem::create_directories(args.dir);
  const bool cold = args.cold && h5dcp_bench::can_drop_caches();

  const auto rows = state_.rows;
  const double gb = state_.gb();
  const auto per_rank_bytes = state_.shard_bytes();
  const std::string ckpt = args.dir + "/ckpt.h5";

  auto saved = state_.make(0, true);
  const auto shards = h5dcp_bench::local_shards(saved);
  auto pinned = at::empty({per_rank_bytes / 4}, at::TensorOptions().dtype(at::kFloat).pinned_memory(true));
  pinned.zero_();  // touched now, as the async staging memory is
  auto uploaded = at::empty({per_rank_bytes / 4}, at::TensorOptions().dtype(at::kFloat).device(device));
  h5dcp::AsyncSaveOptions async_options;
  async_options.staging_bytes = per_rank_bytes;
  // The first async save allocates (pinned) and touches the staging memory,
  // once for the run: made here, untimed.
  h5dcp::async_save(saved, args.dir + "/async.h5", async_options).get();

  // The step's compute: products of two 4096 x 4096 float32 matrices, as many
  // as take about twice the bare device-to-host copy.
  const auto ma = at::randn({4096, 4096}, at::TensorOptions().device(device));
  const auto mb = at::randn({4096, 4096}, at::TensorOptions().device(device));
  queue_compute(ma, mb, 3);
  settle_gpu();
  const double product_seconds = slowest(timed([&] {
                                   queue_compute(ma, mb, 20);
                                   settle_gpu();
                                 })) /
                                 20;

  std::map<std::string, std::vector<double>> t;
  bool correct = true;
  // Every async checkpoint (warm-up and timed) is read back, untimed, right
  // after its save: it holds the values as of the call (the staged one: not
  // the optimizer step that followed it, undone before this).
  bool async_correct = true;
  const auto read_back_equal = [&](const char* name) {
    auto back = state_.make(0, false);
    h5dcp::load(back, args.dir + name);
    return state_.equal(back, 0);
  };
  int products = 1;
  for (int rep = -args.warmup; rep < args.reps; ++rep) {
    if (rep == 0) t.clear();
    t["d2h"].push_back(timed([&] {
      std::int64_t offset = 0;
      for (const auto& shard : shards) {
        pinned.narrow(0, offset, shard.numel()).copy_(shard.reshape({-1}), /*non_blocking=*/true);
        offset += shard.numel();
      }
      settle_gpu();
    }));
    t["h2d"].push_back(timed([&] {
      uploaded.copy_(pinned, /*non_blocking=*/true);
      settle_gpu();
    }));
    fresh(ckpt);
    t["save"].push_back(timed([&] { h5dcp::save(saved, ckpt); }));
    for (const bool drop : {false, true}) {
      if (drop && !cold) continue;
      const std::string suffix = drop ? "_cold" : "";
      for (const int shift : {0, size_ > 1 ? 1 : 0}) {
        auto target = state_.make(shift, false);
        settle_gpu();
        drop_caches(drop);
        t[(shift == 0 ? "load" : "reshard") + suffix].push_back(timed([&] {
          h5dcp::load(target, ckpt);
          settle_gpu();
        }));
        correct &= state_.equal(target, shift);
      }
    }
    fresh(args.dir + "/async.h5");
    double blocking = 0;
    t["async_total"].push_back(timed([&] {
      const double t0 = now();
      auto future = h5dcp::async_save(saved, args.dir + "/async.h5", async_options);
      blocking = now() - t0;
      future.get();
    }));
    t["async_blocking"].push_back(slowest(blocking));
    async_correct &= read_back_equal("/async.h5");

    // A training step without a save, then one with a staged save.
    products = std::max(1, static_cast<int>(2 * median(t["d2h"]) / product_seconds));
    t["step"].push_back(timed([&] {
      queue_compute(ma, mb, products);
      for (const auto& shard : shards) shard.add_(1);  // the optimizer step
      settle_gpu();
    }));
    for (const auto& shard : shards) shard.sub_(1);
    fresh(args.dir + "/staged.h5");
    double call = 0;
    double waited = 0;
    double step = 0;
    t["staged_total"].push_back(timed([&] {
      const double t0 = now();
      auto handles = h5dcp::async_stage_and_save(saved, args.dir + "/staged.h5", async_options);
      call = now() - t0;
      queue_compute(ma, mb, products);
      const double t1 = now();
      handles.staged.wait();
      waited = now() - t1;
      for (const auto& shard : shards) shard.add_(1);  // the optimizer step: after `staged`
      settle_gpu();
      step = now() - t0;
      handles.saved.get();
    }));
    for (const auto& shard : shards) shard.sub_(1);
    t["staged_blocking"].push_back(slowest(call));
    t["staged_wait"].push_back(slowest(waited));
    t["staged_training_waited"].push_back(slowest(call + waited));
    t["staged_step"].push_back(slowest(step));
    t["staging_seconds"].push_back(slowest(h5dcp::last_async_save_stats().staging_seconds));
    async_correct &= read_back_equal("/staged.h5");
  }
  for (const char* name : {"/ckpt.h5", "/async.h5", "/staged.h5"}) fresh(args.dir + name);

  if (rank_ == 0) {
    std::printf(
        "h5dcp-gpu-bench: %d ranks on %s, %d x [%lld, %lld] float32 = %.3f GB, %d reps (medians), fsync on, %s, "
        "%s, async checkpoints %s\n",
        size_, device.str().c_str(), BenchState::kTensors, static_cast<long long>(rows),
        static_cast<long long>(BenchState::kCols), gb, args.reps, cold ? "loads warm and cold" : "loads warm only",
        correct ? "every load checked: equal" : "LOADS WRONG", async_correct ? "equal" : "NOT EQUAL");
    std::printf("%-34s %10s %10s\n", "case", "seconds", "GB/s");
    for (const auto& [name, v] : t)
      std::printf("%-34s %10.4f %10.3f\n", name.c_str(), median(v), gb / std::max(median(v), 1e-9));
    std::printf("step's compute: %d matrix products of %.4f s\n", products, product_seconds);
    if (!args.json.empty()) {
      std::ofstream out(args.json);
      out << "{\n  \"ranks\": " << size_ << ",\n  \"device\": \"" << device.str() << "\",\n  \"gb\": " << gb
          << ",\n  \"shard_bytes\": " << per_rank_bytes << ",\n  \"cold\": " << (cold ? "true" : "false")
          << ",\n  \"reps\": " << args.reps << ",\n  \"warmup_reps\": " << args.warmup
          << ",\n  \"step_products\": " << products << ",\n  \"product_seconds\": " << product_seconds
          << ",\n  \"correct\": " << (correct ? "true" : "false")
          << ",\n  \"async_correct\": " << (async_correct ? "true" : "false");
      h5dcp_bench::json_object(out, "median_seconds", t, [&](const std::vector<double>& v) { out << median(v); });
      out << "\n}\n";
    }
  }
  h5dcp::finish_async_saves();
  MPI_Finalize();
  return correct && async_correct ? 0 : 1;
}
