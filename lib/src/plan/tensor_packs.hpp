#pragma once
// Which tensors of a save share a pack (format 1.2, docs/FORMAT.md): small
// tensors saved whole go into one dataset per dtype, each at an element
// offset, instead of a dataset with its attributes each. A dataset costs its
// creation, its object header and seven attributes: for thousands of small
// tensors that, not their bytes, is the save's time. Pure: every rank
// computes the same packs from the same global plan.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "h5dcp/plan.hpp"

namespace h5dcp::detail {

/// Tensors of at most this many bytes, saved as one chunk, are packed.
inline constexpr std::int64_t kPackedTensorMaxBytes = std::int64_t{64} * 1024;
/// The index table has room for this many dimensions per tensor.
inline constexpr std::size_t kPackedTensorMaxDims = 8;

/// Where a packed tensor lies: its dtype's pack, the offset of its first
/// element and how many it has.
struct PackedPlace {
  DType dtype = DType::Float32;
  std::int64_t offset = 0;
  std::int64_t count = 0;
};

/// The elements [begin, end) of one dtype's pack that one rank writes.
struct PackRange {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

struct TensorPacks {
  /// One entry per plan tensor (GlobalSavePlan::tensors): its place, or
  /// nullopt for a tensor that keeps a dataset of its own.
  std::vector<std::optional<PackedPlace>> places;
  /// Elements of each dtype's pack; only dtypes that have packed tensors.
  std::map<DType, std::int64_t> elements;
  /// What each writer writes of each pack, keyed by (dtype, rank): one
  /// range, the rank's tensors in the plan's (fqn) order, so a rank writes
  /// each pack once however many tensors it holds.
  std::map<std::pair<DType, int>, PackRange> ranges;
};

/// The packs of `plan`: every tensor of at most `max_bytes` bytes whose one
/// chunk is the whole tensor and that has at most kPackedTensorMaxDims
/// dimensions (0-d and empty tensors included), laid out by (dtype, writer,
/// fqn). `max_bytes` < 0 packs nothing (a writer that keeps one dataset
/// per tensor).
TensorPacks plan_tensor_packs(const GlobalSavePlan& plan, std::int64_t max_bytes = kPackedTensorMaxBytes);

}  // namespace h5dcp::detail
