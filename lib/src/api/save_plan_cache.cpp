#include "h5dcp/save_plan_cache.hpp"

#include "api/save_plan_cache_state.hpp"

namespace h5dcp {

SavePlanCache::SavePlanCache() : state_(std::make_unique<detail::SavePlanCacheState>()) {}
SavePlanCache::~SavePlanCache() = default;
SavePlanCache::SavePlanCache(SavePlanCache&&) noexcept = default;
SavePlanCache& SavePlanCache::operator=(SavePlanCache&&) noexcept = default;

std::int64_t SavePlanCache::reused() const noexcept { return state_ ? state_->reused : 0; }
std::int64_t SavePlanCache::planned() const noexcept { return state_ ? state_->planned : 0; }

void SavePlanCache::clear() noexcept {
  if (!state_) return;
  state_->generation = 0;
  state_->digest = 0;
  state_->plan = GlobalSavePlan();
}

namespace detail {

SavePlanCacheState& SavePlanCacheAccess::state(SavePlanCache& cache) {
  if (!cache.state_) cache.state_ = std::make_unique<SavePlanCacheState>();
  return *cache.state_;
}

}  // namespace detail
}  // namespace h5dcp
