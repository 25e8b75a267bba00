#include "plan/save_plan.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>

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

// What kind_text prints, compared without building the text (it is built
// only for the error message: the merge meets every item of every rank).
bool same_kind(const WriteItem& a, const WriteItem& b) {
  if (a.type != b.type) return false;
  if (a.type == WriteItemType::Value) return a.encoding == b.encoding;
  return a.dtype == b.dtype && a.global_shape == b.global_shape;
}

struct Holder {
  int rank;
  std::size_t shard_index;
};

// One rank's item of a leaf.
struct Held {
  const WriteItem* item;
  int rank;
};

// Everything the ranks said about one leaf fqn, in rank order.
struct LeafKey {
  std::string_view fqn;
  std::vector<Held> held;
  const WriteItem& first() const { return *held.front().item; }
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
  std::map<std::string, std::pair<ContainerKind, int>> containers;  // kind, first rank
  // Leaves by fqn, looked up once per item of every rank (a million at 1,024
  // ranks x 1,000 tensors): hashed views into the local plans, sorted once.
  std::unordered_map<std::string_view, std::size_t> leaf_index;
  std::vector<LeafKey> leaves;

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
      const auto [it, inserted] = containers.emplace(fqn, std::make_pair(kind, rank));
      if (!inserted && it->second.first != kind)
        throw disagree(fqn, it->second.second, kind_text(it->second.first), rank, kind_text(kind));
    }
    for (const auto& item : local_plans[r].items) {
      const auto& fqn = item.index.fqn;
      const auto [found, first_time] = leaf_index.emplace(fqn, leaves.size());
      if (first_time) {
        // A key is checked where it is first met: the same text on a later
        // rank passes the same checks.
        require_storable_key(fqn, on_rank);
        require_readable_parent(fqn, on_rank);
        leaves.push_back(LeafKey{fqn, {}});
      }
      auto& leaf = leaves[found->second];
      if (!leaf.held.empty()) {
        const auto& first = leaf.first();
        const int first_rank = leaf.held.front().rank;
        if (!same_kind(first, item)) throw disagree(fqn, first_rank, kind_text(first), rank, kind_text(item));
        if (item.type == WriteItemType::Value && first.payload != item.payload)
          throw UsageError("h5dcp: ranks disagree on the value of '" + fqn + "' (ranks " + std::to_string(first_rank) +
                           " and " + std::to_string(rank) +
                           "); a value saved from several ranks must be the same on all of them");
      }
      leaf.held.push_back({&item, rank});
    }
  }
  for (const auto& [fqn, kind] : containers) {
    if (const auto it = leaf_index.find(fqn); it != leaf_index.end()) {
      const auto& leaf = leaves[it->second];
      throw disagree(fqn, kind.second, kind_text(kind.first), leaf.held.front().rank, kind_text(leaf.first()));
    }
  }

  // Every leaf and container lives in a container (or the root): a custom
  // planner that forgets one would otherwise fail deep inside HDF5.
  auto check_parent = [&](std::string_view fqn) {
    const auto slash = fqn.rfind('/');
    if (slash == std::string_view::npos) return;
    const std::string parent(fqn.substr(0, slash));
    if (containers.count(parent) == 0)
      throw UsageError("h5dcp: the plan has '" + std::string(fqn) + "' but not its container '" + parent + "'");
  };
  for (const auto& [fqn, kind] : containers) check_parent(fqn);
  std::sort(leaves.begin(), leaves.end(), [](const LeafKey& a, const LeafKey& b) { return a.fqn < b.fqn; });
  for (const auto& leaf : leaves) check_parent(leaf.fqn);

  GlobalSavePlan plan;
  plan.world_size = static_cast<int>(local_plans.size());
  for (const auto& [fqn, kind] : containers) plan.containers.emplace_back(fqn, kind.first);
  WriterBalancer balancer(local_plans.size());

  // The holders of each planned chunk: one flat list per tensor, chunk c's
  // holders at [first[c], first[c + 1]). A vector per chunk cost an
  // allocation for each of a million chunks at 1,024 ranks x 1,000 tensors.
  struct TensorHolders {
    std::vector<Holder> holders;
    std::vector<std::size_t> first;
  };
  std::vector<TensorHolders> chunk_holders;
  std::vector<ChunkStorageMetadata> boxes;
  for (auto& leaf : leaves) {
    const auto& first = leaf.first();
    if (first.type == WriteItemType::Value) {
      plan.values.push_back(PlannedValue{std::string(leaf.fqn), first.encoding, first.payload, leaf.held.front().rank});
      continue;
    }
    const std::string fqn(leaf.fqn);
    // Identical blocks (replicas) side by side, in rank order among them.
    // Usually sorted already (ranks hold consecutive blocks in rank order):
    // checking is one pass, the sort touches every item's offsets n log n
    // times.
    const auto by_offsets = [](const Held& a, const Held& b) { return a.item->chunk.offsets < b.item->chunk.offsets; };
    if (!std::is_sorted(leaf.held.begin(), leaf.held.end(), by_offsets))
      std::stable_sort(leaf.held.begin(), leaf.held.end(), by_offsets);
    PlannedTensor t{fqn, first.dtype, first.global_shape, first.type == WriteItemType::Shard, {}};
    boxes.clear();
    auto& holders = chunk_holders.emplace_back();
    holders.holders.reserve(leaf.held.size());
    for (std::size_t i = 0; i < leaf.held.size();) {
      const auto& box = leaf.held[i].item->chunk;
      holders.first.push_back(holders.holders.size());
      std::size_t j = i;
      for (; j < leaf.held.size() && leaf.held[j].item->chunk.offsets == box.offsets; ++j) {
        const auto& h = leaf.held[j];
        if (h.item->chunk.sizes != box.sizes) {
          std::set<int> ranks;
          for (std::size_t k = i; k <= j; ++k) ranks.insert(leaf.held[k].rank);
          throw UsageError("h5dcp: shards of '" + fqn + "' overlap: " + describe_box(box) + " and " +
                           describe_box(h.item->chunk) + " (ranks " + ranks_text(ranks) + ")");
        }
        holders.holders.push_back({h.rank, h.item->index.index.value_or(0)});
      }
      const auto& writer = holders.holders[holders.first.back()];
      boxes.push_back(box);
      t.chunks.push_back(PlannedChunk{{}, writer.rank, writer.shard_index});
      i = j;
    }
    holders.first.push_back(holders.holders.size());
    check_exact_tiling(fqn, t.global_shape, boxes);
    for (std::size_t c = 0; c < boxes.size(); ++c) t.chunks[c].chunk = std::move(boxes[c]);
    plan.tensors.push_back(std::move(t));
  }

  // Balance only once every vector is final: the callbacks hold references.
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    auto& t = plan.tensors[i];
    const auto& holders = chunk_holders[i];
    for (std::size_t c = 0; c < t.chunks.size(); ++c) {
      auto& chunk = t.chunks[c];
      const auto bytes = chunk_bytes(t, chunk);
      const auto begin = holders.holders.begin() + static_cast<std::ptrdiff_t>(holders.first[c]);
      const auto end = holders.holders.begin() + static_cast<std::ptrdiff_t>(holders.first[c + 1]);
      if (end - begin == 1)
        balancer.fixed(chunk.writer, bytes);
      else
        balancer.shared(bytes, std::vector<Holder>(begin, end), [&chunk](const Holder& h) {
          chunk.writer = h.rank;
          chunk.writer_shard_index = h.shard_index;
        });
    }
  }
  std::size_t value = 0;
  for (const auto& leaf : leaves) {
    if (leaf.first().type != WriteItemType::Value) continue;
    auto& v = plan.values[value++];
    const auto bytes = static_cast<std::int64_t>(v.payload.size());
    if (leaf.held.size() == 1) {
      balancer.fixed(v.writer, bytes);
      continue;
    }
    std::vector<Holder> holders;
    for (const auto& h : leaf.held) holders.push_back({h.rank, 0});
    balancer.shared(bytes, std::move(holders), [&v](const Holder& h) { v.writer = h.rank; });
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
