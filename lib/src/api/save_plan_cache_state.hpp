#pragma once
// What a SavePlanCache holds (h5dcp/save_plan_cache.hpp); used by the plan
// step (api/save_steps.cpp).

#include <cstdint>

#include "h5dcp/plan.hpp"
#include "h5dcp/save_plan_cache.hpp"

namespace h5dcp::detail {

struct SavePlanCacheState {
  std::uint64_t generation = 0;  ///< 0: no plan; else the same on every rank that took part
  std::uint64_t digest = 0;      ///< layout_digest of this rank's local plan at that save
  GlobalSavePlan plan;
  std::int64_t reused = 0;
  std::int64_t planned = 0;
};

struct SavePlanCacheAccess {
  /// The cache's state (made anew for a moved-from cache).
  static SavePlanCacheState& state(SavePlanCache& cache);
};

}  // namespace h5dcp::detail
