#pragma once
// A save's global plan kept for the next save with the same sharding (DCP's
// plan caching). Plain C++: no torch, no HDF5, no MPI.

#include <cstdint>
#include <memory>

namespace h5dcp {

namespace detail {
struct SavePlanCacheState;
struct SavePlanCacheAccess;
}  // namespace detail

/// Pass the same cache, on every rank, to the saves of one training run
/// (SaveOptions::plan_cache): a save whose every rank holds the same keys,
/// kinds, dtypes, shapes and blocks as at the cached save, and values of
/// the same encodings and sizes, reuses the cached global plan. Its plan step
/// then exchanges no tensor metadata, only an 8-byte token and the
/// non-tensor values per rank (still checked to agree across the ranks
/// holding them), and the planner's create_global_plan is not called (its
/// set_up and create_local_plan are, to compare). The reused plan is the
/// one the default planner would make again; a custom planner whose global
/// plan depends on more than its local plans should not be given a cache.
/// Any change on any rank plans anew, as without a cache, and keeps the new
/// plan. Not thread-safe: one save at a time uses it (async saves use it in
/// the calling thread, during the call). Holds the plan: at 1,024 ranks x
/// 1,000 tensors about as much memory as the encoded plan (tens of MB).
class SavePlanCache {
 public:
  SavePlanCache();
  ~SavePlanCache();
  SavePlanCache(SavePlanCache&&) noexcept;
  SavePlanCache& operator=(SavePlanCache&&) noexcept;
  SavePlanCache(const SavePlanCache&) = delete;
  SavePlanCache& operator=(const SavePlanCache&) = delete;

  /// Saves on this rank whose plan was reused / planned (anew) with this cache.
  std::int64_t reused() const noexcept;
  std::int64_t planned() const noexcept;
  /// Forgets the plan (local, not collective: the next save through this
  /// cache plans anew on every rank, since this rank offers no plan).
  void clear() noexcept;

 private:
  friend struct detail::SavePlanCacheAccess;
  std::unique_ptr<detail::SavePlanCacheState> state_;
};

}  // namespace h5dcp
