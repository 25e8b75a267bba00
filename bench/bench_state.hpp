#pragma once
// The state dict h5dcp-bench and h5dcp-gpu-bench save, the peer benchmark's
// (bench/dcp_peer_bench.py): 4 float32 tensors [rows, 4096], "layer<i>.weight",
// row-sharded over the ranks, element [r, c] of tensor i holding r + i * 1e6.

#include <ATen/ATen.h>
#include <mpi.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "h5dcp/state_dict.hpp"

namespace h5dcp_bench {

/// The local shard of each tensor of `sd` (BenchState::make's), in name order.
inline std::vector<at::Tensor> local_shards(const h5dcp::StateDict& sd) {
  std::vector<at::Tensor> shards;
  for (const auto& [name, value] : sd) shards.push_back(std::get<h5dcp::ShardedTensor>(value).local_shards()[0].tensor);
  return shards;
}

struct BenchState {
  static constexpr int kTensors = 4;
  static constexpr std::int64_t kCols = 4096;

  std::int64_t rows = 0;  // each tensor's, a multiple of `size`
  int rank = 0;
  int size = 1;
  c10::Device device = c10::Device(at::kCPU);

  /// The rows that make about `gib` GiB in all, a multiple of `size`.
  static std::int64_t rows_for(double gib, int size) {
    const auto rows = static_cast<std::int64_t>(gib * (1 << 30) / 4 / kTensors / kCols);
    return rows - rows % size;
  }
  double gb() const { return static_cast<double>(rows) * kCols * 4 * kTensors / 1e9; }
  std::int64_t shard_bytes() const { return rows / size * kCols * 4 * kTensors; }

  /// Tensor i's key in the state dict.
  static std::string name(int i) { return "layer" + std::to_string(i) + ".weight"; }

  /// The rows of tensor i that rank `owner` holds: the values, or zeros unless `fill`.
  at::Tensor rows_of(int owner, int i, bool fill) const {
    const auto per_rank = rows / size;
    const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
    if (!fill) return at::zeros({per_rank, kCols}, options);
    return (at::arange(per_rank, options).unsqueeze(1) + static_cast<double>(owner * per_rank) + i * 1e6)
        .expand({per_rank, kCols})
        .contiguous();
  }

  /// This rank's state dict, holding the rows of rank (rank + shift) % size.
  h5dcp::StateDict make(int shift, bool fill) const {
    const int owner = (rank + shift) % size;
    h5dcp::StateDict sd;
    for (int i = 0; i < kTensors; ++i)
      sd[name(i)] =
          h5dcp::ShardedTensor({rows, kCols}, {h5dcp::Shard{rows_of(owner, i, fill), {owner * (rows / size), 0}}});
    return sd;
  }

  /// Whether every rank's `sd` (made with `shift`, loaded) holds the values on `device`. Collective.
  bool equal(const h5dcp::StateDict& sd, int shift) const {
    const auto shards = local_shards(sd);
    int ok = 1;
    for (int i = 0; i < kTensors; ++i)
      ok &= shards[i].device() == device && at::equal(shards[i], rows_of((rank + shift) % size, i, true)) ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return ok == 1;
  }
};

}  // namespace h5dcp_bench
