#pragma once
// A real model's shape for h5dcp-bench: the state dict of a GPT-like
// transformer with AdamW state, every parameter and moment FSDP-sharded on
// dim 0 over the ranks (the layout bench/dcp_peer_bench.py gives DCP).
// Per layer: ln1, attn.qkv, attn.proj, ln2, mlp.fc1, mlp.fc2 (weights and
// biases); then embed, pos, ln_f. Optimizer: exp_avg and exp_avg_sq of every
// parameter, sharded like it, and its step, a replicated 0-d float32.
// Values: element [r, ...] of tensor number k holds r + k * 16384, exact in
// float32, so loads are checked value for value.

#include <cstdint>
#include <string>
#include <vector>

#include "bench_posix_baseline.hpp"
#include "h5dcp/state_dict.hpp"

namespace h5dcp_bench {

struct TransformerShape {
  int layers = 24;
  std::int64_t hidden = 1024;  // 4 KiB layer-norm vectors in float32
  std::int64_t vocab = 16384;  // a 64 MiB embedding at hidden 1024
  std::int64_t positions = 1024;
};

/// This rank's part of the state dict (model/..., optim/state/<param>/...):
/// zeros unless `fill`. Every dim 0 must divide by `world`.
h5dcp::StateDict transformer_state(const TransformerShape& shape, int rank, int world, bool fill);

/// Whether `sd` (from transformer_state, loaded) holds the filled values. Not
/// collective.
bool transformer_holds_values(const h5dcp::StateDict& sd, const TransformerShape& shape, int rank, int world);

/// Bytes of the whole state dict (all ranks) and its number of tensors.
std::int64_t transformer_bytes(const TransformerShape& shape);
int transformer_tensor_count(const TransformerShape& shape);

/// Where a rank's bytes go in transformer_ranges.
enum class FileLayout {
  kInterleaved,  // one file, every tensor whole, each rank's rows between the other ranks' (h5dcp's layout)
  kRankRegions,  // one file, each rank's rows of every tensor in a region of the rank's own
  kFilePerRank,  // a file of the rank's own (the peer's layout)
};

/// This rank's bytes of the sharded tensors of `sd` (transformer_state's; the
/// 0-d steps left out) as file ranges in `layout`, in the order h5dcp writes
/// them (every rank holds the same bytes).
std::vector<FileRange> transformer_ranges(const h5dcp::StateDict& sd, const TransformerShape& shape, int rank,
                                          int world, FileLayout layout);

/// "24 layers, hidden 1024, vocab 16384" for the report.
std::string describe(const TransformerShape& shape);

}  // namespace h5dcp_bench
