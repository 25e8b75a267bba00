#include "plan/pack_runs.hpp"

#include <algorithm>

namespace h5dcp::detail {

void sort_ranges(std::vector<ElementRange>& announced) {
  std::sort(announced.begin(), announced.end(),
            [](const ElementRange& a, const ElementRange& b) { return a.first < b.first; });
}

ElementRange pack_run(const std::vector<ElementRange>& announced, ElementRange request, std::int64_t gap,
                      std::int64_t max_elements) {
  std::int64_t end = request.end();
  auto it = std::lower_bound(announced.begin(), announced.end(), request.first,
                             [](const ElementRange& r, std::int64_t first) { return r.first < first; });
  for (; it != announced.end() && it->first <= end + gap; ++it) {
    const std::int64_t joined = std::max(end, it->end());
    if (joined - request.first > max_elements) break;
    end = joined;
  }
  return {request.first, end - request.first};
}

}  // namespace h5dcp::detail
