#include "plan/pack_runs.hpp"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace h5dcp::detail {

void sort_ranges(std::vector<ElementRange>& announced) {
  std::stable_sort(announced.begin(), announced.end(),
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

std::vector<ElementRange> scatter_pieces(const std::vector<ElementRange>& announced, ElementRange run,
                                         std::int64_t element_bytes) {
  std::vector<ElementRange> pieces;
  std::int64_t at = run.first;
  auto it = std::lower_bound(announced.begin(), announced.end(), run.first,
                             [](const ElementRange& r, std::int64_t first) { return r.first < first; });
  for (; it != announced.end() && it->first < run.end(); ++it) {
    if (it->count == 0) continue;
    if (it->into == nullptr || it->first < at || it->end() > run.end()) return {};
    if (it->first > at && pieces.empty()) return {};  // the run starts at no announced range
    if (it->first > at) pieces.push_back({at, it->first - at, nullptr});
    pieces.push_back(*it);
    at = it->end();
  }
  if (at != run.end()) return {};  // nothing announced inside it, or a gap at its end
  // No two places share a byte.
  std::vector<std::pair<std::uintptr_t, std::uintptr_t>> places;
  for (const auto& piece : pieces)
    if (piece.into != nullptr) {
      const auto start = reinterpret_cast<std::uintptr_t>(piece.into);
      places.emplace_back(start, start + static_cast<std::uintptr_t>(piece.count * element_bytes));
    }
  std::sort(places.begin(), places.end());
  for (std::size_t k = 1; k < places.size(); ++k)
    if (places[k].first < places[k - 1].second) return {};
  return pieces;
}

}  // namespace h5dcp::detail
