#include "plan/tensor_packs.hpp"

#include <algorithm>
#include <tuple>

#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {
namespace {

bool packable(const PlannedTensor& t, std::int64_t max_bytes) {
  if (max_bytes < 0 || t.global_shape.size() > kPackedTensorMaxDims) return false;
  // Saved whole by one writer: a sharded tensor's chunks stay a dataset that
  // any sharding can be read from by hyperslabs.
  if (t.chunks.size() != 1 || t.chunks.front().chunk.sizes != t.global_shape) return false;
  const auto bytes = checked_bytes(t.global_shape, static_cast<std::int64_t>(dtype_size(t.dtype)));
  return bytes && *bytes <= max_bytes;
}

}  // namespace

TensorPacks plan_tensor_packs(const GlobalSavePlan& plan, std::int64_t max_bytes) {
  TensorPacks packs;
  packs.places.resize(plan.tensors.size());
  // (dtype, writer, fqn): the plan's tensors are sorted by fqn already, so a
  // stable order by (dtype, writer) keeps each rank's tensors together.
  std::vector<std::tuple<DType, int, std::size_t>> order;
  for (std::size_t t = 0; t < plan.tensors.size(); ++t)
    if (packable(plan.tensors[t], max_bytes))
      order.emplace_back(plan.tensors[t].dtype, plan.tensors[t].chunks.front().writer, t);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  for (const auto& [dtype, writer, t] : order) {
    auto& end = packs.elements[dtype];
    const std::int64_t count = volume(plan.tensors[t].global_shape);
    packs.places[t] = PackedPlace{dtype, end, count};
    packs.ranges.try_emplace({dtype, writer}, PackRange{end, end}).first->second.end = end + count;
    end += count;
  }
  return packs;
}

}  // namespace h5dcp::detail
