#include "plan/save_plan.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

std::string where(const WriteItem& item) {
  if (!item.sharded) return "'" + item.index.fqn + "'";
  return "shard " + std::to_string(item.index.index.value_or(0)) + " of '" + item.index.fqn + "'";
}

std::string ranks_text(const std::set<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

std::int64_t chunk_bytes(const PlannedTensor& t, const PlannedChunk& c) {
  return volume(c.chunk.sizes) * static_cast<std::int64_t>(dtype_size(t.dtype));
}

}  // namespace

void validate_local_plan(const SavePlan& plan) {
  std::map<std::string, DType> dtype_of;
  for (const auto& item : plan.items) {
    const auto& g = item.global_shape;
    for (auto s : g)
      if (s < 0) throw UsageError("h5dcp: '" + item.index.fqn + "' has a negative global size " + describe_shape(g));
    if (item.chunk.offsets.size() != g.size() || item.chunk.sizes.size() != g.size())
      throw UsageError("h5dcp: " + where(item) + " has " + std::to_string(item.chunk.sizes.size()) +
                       " dimensions (offsets: " + std::to_string(item.chunk.offsets.size()) +
                       ") but the global shape " + describe_shape(g) + " has " + std::to_string(g.size()));
    for (std::size_t d = 0; d < g.size(); ++d) {
      if (item.chunk.offsets[d] < 0 || item.chunk.sizes[d] < 0 || item.chunk.offsets[d] + item.chunk.sizes[d] > g[d])
        throw UsageError("h5dcp: " + where(item) + " at " + describe_box(item.chunk) +
                         " lies outside the global shape " + describe_shape(g));
    }
    const auto [it, inserted] = dtype_of.emplace(item.index.fqn, item.dtype);
    if (!inserted && it->second != item.dtype)
      throw UsageError("h5dcp: shards of '" + item.index.fqn + "' mix dtypes " + std::string(dtype_name(it->second)) +
                       " and " + std::string(dtype_name(item.dtype)));
  }
}

GlobalSavePlan create_global_save_plan(const std::vector<SavePlan>& local_plans) {
  struct Holder {
    int rank;
    std::size_t shard_index;
  };
  struct KeyState {
    const WriteItem* first = nullptr;
    int first_rank = 0;
    std::map<std::vector<std::int64_t>, std::pair<ChunkStorageMetadata, std::vector<Holder>>> chunks;  // by offsets
  };
  std::map<std::string, KeyState> keys;

  for (std::size_t r = 0; r < local_plans.size(); ++r) {
    const int rank = static_cast<int>(r);
    for (const auto& item : local_plans[r].items) {
      auto& key = keys[item.index.fqn];
      if (key.first == nullptr) {
        key.first = &item;
        key.first_rank = rank;
      } else if (key.first->dtype != item.dtype || key.first->global_shape != item.global_shape ||
                 key.first->sharded != item.sharded) {
        auto kind = [](const WriteItem& i) { return i.sharded ? "sharded" : "plain"; };
        throw UsageError("h5dcp: ranks disagree on '" + item.index.fqn + "': rank " + std::to_string(key.first_rank) +
                         " has a " + kind(*key.first) + " " + std::string(dtype_name(key.first->dtype)) + " tensor of " +
                         describe_shape(key.first->global_shape) + ", rank " + std::to_string(rank) + " a " +
                         kind(item) + " " + std::string(dtype_name(item.dtype)) + " tensor of " +
                         describe_shape(item.global_shape));
      }
      auto& slot = key.chunks[item.chunk.offsets];
      if (slot.second.empty()) {
        slot.first = item.chunk;
      } else if (slot.first.sizes != item.chunk.sizes) {
        std::set<int> ranks{rank};
        for (const auto& h : slot.second) ranks.insert(h.rank);
        throw UsageError("h5dcp: shards of '" + item.index.fqn + "' overlap: " + describe_box(slot.first) + " and " +
                         describe_box(item.chunk) + " (ranks " + ranks_text(ranks) + ")");
      }
      slot.second.push_back({rank, item.index.index.value_or(0)});
    }
  }

  GlobalSavePlan plan;
  plan.world_size = static_cast<int>(local_plans.size());
  std::vector<std::int64_t> load(local_plans.size(), 0);
  struct Pending {
    std::size_t tensor;
    std::size_t chunk;
    std::vector<Holder> holders;
  };
  std::vector<Pending> shared;

  for (auto& [fqn, key] : keys) {
    PlannedTensor t{fqn, key.first->dtype, key.first->global_shape, key.first->sharded, {}};
    std::vector<ChunkStorageMetadata> boxes;
    for (auto& [offsets, slot] : key.chunks) {
      boxes.push_back(slot.first);
      PlannedChunk c{slot.first, slot.second.front().rank, slot.second.front().shard_index};
      if (slot.second.size() == 1)
        load[static_cast<std::size_t>(c.writer)] += volume(c.chunk.sizes) * static_cast<std::int64_t>(dtype_size(t.dtype));
      else
        shared.push_back({plan.tensors.size(), t.chunks.size(), slot.second});
      t.chunks.push_back(std::move(c));
    }
    check_exact_tiling(fqn, t.global_shape, boxes);
    plan.tensors.push_back(std::move(t));
  }

  // Replicated chunks go to the least-loaded holder, largest first, so the
  // bytes each rank writes stay balanced (DCP's dedup does the same).
  std::stable_sort(shared.begin(), shared.end(), [&](const Pending& a, const Pending& b) {
    return chunk_bytes(plan.tensors[a.tensor], plan.tensors[a.tensor].chunks[a.chunk]) >
           chunk_bytes(plan.tensors[b.tensor], plan.tensors[b.tensor].chunks[b.chunk]);
  });
  for (const auto& p : shared) {
    auto& chunk = plan.tensors[p.tensor].chunks[p.chunk];
    const auto best = std::min_element(p.holders.begin(), p.holders.end(), [&](const Holder& a, const Holder& b) {
      return load[static_cast<std::size_t>(a.rank)] < load[static_cast<std::size_t>(b.rank)];
    });
    chunk.writer = best->rank;
    chunk.writer_shard_index = best->shard_index;
    load[static_cast<std::size_t>(best->rank)] += chunk_bytes(plan.tensors[p.tensor], chunk);
  }
  return plan;
}

std::vector<std::int64_t> bytes_per_rank(const GlobalSavePlan& plan) {
  std::vector<std::int64_t> bytes(static_cast<std::size_t>(plan.world_size), 0);
  for (const auto& t : plan.tensors)
    for (const auto& c : t.chunks) bytes[static_cast<std::size_t>(c.writer)] += chunk_bytes(t, c);
  return bytes;
}

}  // namespace h5dcp::detail
