#include "plan/save_plan.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "base/key_escape.hpp"
#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

std::string where(const WriteItem& item) {
  if (item.type != WriteItemType::Shard) return "'" + item.index.fqn + "'";
  return "shard " + std::to_string(item.index.index.value_or(0)) + " of '" + item.index.fqn + "'";
}

std::string ranks_text(const std::set<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

std::string kind_text(const WriteItem& i) {
  switch (i.type) {
    case WriteItemType::Tensor:
      return "a plain " + std::string(dtype_name(i.dtype)) + " tensor of " + describe_shape(i.global_shape);
    case WriteItemType::Shard:
      return "a sharded " + std::string(dtype_name(i.dtype)) + " tensor of " + describe_shape(i.global_shape);
    case WriteItemType::Value: return "a value (" + i.encoding + ")";
  }
  return "?";
}

std::string kind_text(ContainerKind kind) { return kind == ContainerKind::Dict ? "a dict" : "a list"; }

std::int64_t chunk_bytes(const PlannedTensor& t, const PlannedChunk& c) {
  return volume(c.chunk.sizes) * static_cast<std::int64_t>(dtype_size(t.dtype));
}

struct Holder {
  int rank;
  std::size_t shard_index;
};

// Everything the ranks said about one tensor fqn.
struct TensorKey {
  const WriteItem* first = nullptr;
  int first_rank = 0;
  std::map<Shape, std::pair<ChunkStorageMetadata, std::vector<Holder>>> chunks;  // by offsets
};

struct ValueKey {
  const WriteItem* first = nullptr;
  int first_rank = 0;
  std::vector<int> holders;
};

// Assigns each block or value held by several ranks to the least-loaded of
// them, largest first, so the bytes each rank writes stay balanced (DCP's
// dedup does the same); single holders are fixed first.
class WriterBalancer {
 public:
  explicit WriterBalancer(std::size_t ranks) : load_(ranks, 0) {}
  void fixed(int rank, std::int64_t bytes) { load_[static_cast<std::size_t>(rank)] += bytes; }
  void shared(std::int64_t bytes, std::vector<Holder> holders, std::function<void(const Holder&)> assign) {
    pending_.push_back({bytes, std::move(holders), std::move(assign)});
  }
  void run() {
    std::stable_sort(pending_.begin(), pending_.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
    for (auto& p : pending_) {
      const auto best = std::min_element(p.holders.begin(), p.holders.end(), [&](const Holder& a, const Holder& b) {
        return load_[static_cast<std::size_t>(a.rank)] < load_[static_cast<std::size_t>(b.rank)];
      });
      load_[static_cast<std::size_t>(best->rank)] += p.bytes;
      p.assign(*best);
    }
  }

 private:
  struct Pending {
    std::int64_t bytes;
    std::vector<Holder> holders;
    std::function<void(const Holder&)> assign;
  };
  std::vector<std::int64_t> load_;
  std::vector<Pending> pending_;
};

// A leaf's parent container, checked as require_readable_depth checks a
// container, so a planner that lists no containers cannot slip a deep one by.
void require_readable_parent(const std::string& fqn, std::string_view where = {}) {
  const auto slash = fqn.rfind('/');
  if (slash != std::string::npos) require_readable_depth(std::string_view(fqn).substr(0, slash), where);
}

}  // namespace

void validate_local_plan(const SavePlan& plan) {
  // Refused here, in the plan step, before any file exists: a key that could
  // not be read back as itself (require_storable_key).
  for (const auto& [fqn, kind] : plan.containers) {
    require_storable_key(fqn);
    require_readable_depth(fqn);
  }
  std::map<std::string, const WriteItem*> first_of;
  for (const auto& item : plan.items) {
    require_storable_key(item.index.fqn);
    require_readable_parent(item.index.fqn);
    const auto [it, inserted] = first_of.emplace(item.index.fqn, &item);
    if (!inserted && (item.type != WriteItemType::Shard || it->second->type != WriteItemType::Shard))
      throw UsageError("h5dcp: '" + item.index.fqn + "' appears twice in the state dict");
    if (item.type == WriteItemType::Value) continue;
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
    if (it->second->dtype != item.dtype || it->second->global_shape != g)
      throw UsageError("h5dcp: shards of '" + item.index.fqn + "' disagree: " + kind_text(*it->second) + " and " +
                       kind_text(item));
  }
}

GlobalSavePlan create_global_save_plan(const std::vector<SavePlan>& local_plans) {
  std::map<std::string, TensorKey> tensors;
  std::map<std::string, ValueKey> values;
  std::map<std::string, std::pair<ContainerKind, int>> containers;  // kind, first rank
  std::map<std::string, std::pair<std::string, int>> leaf_kind;     // fqn -> kind text, first rank

  auto disagree = [](const std::string& fqn, int r1, const std::string& k1, int r2, const std::string& k2) {
    return UsageError("h5dcp: ranks disagree on '" + fqn + "': rank " + std::to_string(r1) + " has " + k1 + ", rank " +
                      std::to_string(r2) + " " + k2);
  };

  for (std::size_t r = 0; r < local_plans.size(); ++r) {
    const int rank = static_cast<int>(r);
    // Again for planners that skip validate_local_plan: the file would
    // otherwise hold a key cut short at a NUL byte.
    const auto on_rank = " on rank " + std::to_string(rank);
    for (const auto& [fqn, kind] : local_plans[r].containers) {
      require_storable_key(fqn, on_rank);
      require_readable_depth(fqn, on_rank);
    }
    for (const auto& item : local_plans[r].items) {
      require_storable_key(item.index.fqn, on_rank);
      require_readable_parent(item.index.fqn, on_rank);
    }
    for (const auto& [fqn, kind] : local_plans[r].containers) {
      const auto [it, inserted] = containers.emplace(fqn, std::make_pair(kind, rank));
      if (!inserted && it->second.first != kind)
        throw disagree(fqn, it->second.second, kind_text(it->second.first), rank, kind_text(kind));
    }
    for (const auto& item : local_plans[r].items) {
      const auto& fqn = item.index.fqn;
      const auto [lk, first_time] = leaf_kind.emplace(fqn, std::make_pair(kind_text(item), rank));
      if (!first_time && lk->second.first != kind_text(item))
        throw disagree(fqn, lk->second.second, lk->second.first, rank, kind_text(item));
      if (item.type == WriteItemType::Value) {
        auto& key = values[fqn];
        if (key.first == nullptr) {
          key.first = &item;
          key.first_rank = rank;
        } else if (key.first->payload != item.payload) {
          throw UsageError("h5dcp: ranks disagree on the value of '" + fqn + "' (ranks " +
                           std::to_string(key.first_rank) + " and " + std::to_string(rank) +
                           "); a value saved from several ranks must be the same on all of them");
        }
        key.holders.push_back(rank);
        continue;
      }
      auto& key = tensors[fqn];
      if (key.first == nullptr) {
        key.first = &item;
        key.first_rank = rank;
      }
      auto& slot = key.chunks[item.chunk.offsets];
      if (slot.second.empty()) {
        slot.first = item.chunk;
      } else if (slot.first.sizes != item.chunk.sizes) {
        std::set<int> ranks{rank};
        for (const auto& h : slot.second) ranks.insert(h.rank);
        throw UsageError("h5dcp: shards of '" + fqn + "' overlap: " + describe_box(slot.first) + " and " +
                         describe_box(item.chunk) + " (ranks " + ranks_text(ranks) + ")");
      }
      slot.second.push_back({rank, item.index.index.value_or(0)});
    }
  }
  for (const auto& [fqn, kind] : containers) {
    if (const auto it = leaf_kind.find(fqn); it != leaf_kind.end())
      throw disagree(fqn, kind.second, kind_text(kind.first), it->second.second, it->second.first);
  }

  // Every leaf and container lives in a container (or the root): a custom
  // planner that forgets one would otherwise fail deep inside HDF5.
  auto check_parent = [&](const std::string& fqn) {
    const auto slash = fqn.rfind('/');
    if (slash != std::string::npos && containers.count(fqn.substr(0, slash)) == 0)
      throw UsageError("h5dcp: the plan has '" + fqn + "' but not its container '" + fqn.substr(0, slash) + "'");
  };
  for (const auto& [fqn, kind] : containers) check_parent(fqn);
  for (const auto& [fqn, kind] : leaf_kind) check_parent(fqn);

  GlobalSavePlan plan;
  plan.world_size = static_cast<int>(local_plans.size());
  for (const auto& [fqn, kind] : containers) plan.containers.emplace_back(fqn, kind.first);
  WriterBalancer balancer(local_plans.size());

  for (auto& [fqn, key] : tensors) {
    PlannedTensor t{fqn, key.first->dtype, key.first->global_shape, key.first->type == WriteItemType::Shard, {}};
    std::vector<ChunkStorageMetadata> boxes;
    for (auto& [offsets, slot] : key.chunks) {
      boxes.push_back(slot.first);
      t.chunks.push_back(PlannedChunk{slot.first, slot.second.front().rank, slot.second.front().shard_index});
    }
    check_exact_tiling(fqn, t.global_shape, boxes);
    plan.tensors.push_back(std::move(t));
  }
  for (auto& [fqn, key] : values)
    plan.values.push_back(PlannedValue{fqn, key.first->encoding, key.first->payload, key.holders.front()});

  // Balance only once every vector is final: the callbacks hold references.
  auto t_it = tensors.begin();
  for (auto& t : plan.tensors) {
    auto slot = t_it->second.chunks.begin();
    for (auto& c : t.chunks) {
      const auto bytes = chunk_bytes(t, c);
      if (slot->second.second.size() == 1)
        balancer.fixed(c.writer, bytes);
      else
        balancer.shared(bytes, slot->second.second, [&c](const Holder& h) {
          c.writer = h.rank;
          c.writer_shard_index = h.shard_index;
        });
      ++slot;
    }
    ++t_it;
  }
  auto v_it = values.begin();
  for (auto& v : plan.values) {
    const auto bytes = static_cast<std::int64_t>(v.payload.size());
    std::vector<Holder> holders;
    for (int r : v_it->second.holders) holders.push_back({r, 0});
    if (holders.size() == 1)
      balancer.fixed(v.writer, bytes);
    else
      balancer.shared(bytes, holders, [&v](const Holder& h) { v.writer = h.rank; });
    ++v_it;
  }
  balancer.run();
  return plan;
}

}  // namespace h5dcp::detail

namespace h5dcp {

std::vector<std::int64_t> GlobalSavePlan::bytes_per_rank() const {
  std::vector<std::int64_t> bytes(static_cast<std::size_t>(world_size), 0);
  for (const auto& t : tensors)
    for (const auto& c : t.chunks)
      bytes[static_cast<std::size_t>(c.writer)] +=
          detail::volume(c.chunk.sizes) * static_cast<std::int64_t>(dtype_size(t.dtype));
  for (const auto& v : values) bytes[static_cast<std::size_t>(v.writer)] += static_cast<std::int64_t>(v.payload.size());
  return bytes;
}

}  // namespace h5dcp
