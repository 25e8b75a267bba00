#include "core/fault_injection.hpp"

#include <cstdlib>
#include <string>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {

void fault_point(std::string_view point, int rank) {
  const char* spec = std::getenv("H5DCP_INJECT_FAULT");
  if (spec == nullptr) return;
  const std::string wanted = std::string(point) + "@" + std::to_string(rank);
  std::string_view rest(spec);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    if (rest.substr(0, comma) == wanted)
      throw Error("injected fault at " + std::string(point) + " on rank " + std::to_string(rank));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
}

}  // namespace h5dcp::detail
