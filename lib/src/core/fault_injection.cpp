#include "core/fault_injection.hpp"

#include <chrono>
#include <cstdlib>
#include <thread>
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
    const auto entry = rest.substr(0, comma);
    if (entry == wanted)
      throw Error("injected fault at " + std::string(point) + " on rank " + std::to_string(rank));
    if (entry.substr(0, wanted.size()) == wanted && entry.size() > wanted.size() && entry[wanted.size()] == '~') {
      std::this_thread::sleep_for(std::chrono::duration<double>(std::stod(std::string(entry.substr(wanted.size() + 1)))));
      return;
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
}

}  // namespace h5dcp::detail
