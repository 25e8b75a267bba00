#include "base/fault_injection.hpp"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "h5dcp/error.hpp"

namespace h5dcp::detail {
namespace {

// The action part of the entry in H5DCP_INJECT_FAULT naming this point and
// rank ("" for a plain throw), or nothing when no entry names them.
std::optional<std::string_view> requested_action(std::string_view point, int rank) {
  const char* spec = std::getenv("H5DCP_INJECT_FAULT");
  if (spec == nullptr) return std::nullopt;
  const std::string this_rank = std::to_string(rank);
  std::string_view rest(spec);
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const auto entry = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const auto at = entry.rfind('@');
    if (at == std::string_view::npos || entry.substr(0, at) != point) continue;
    auto target = entry.substr(at + 1);
    const auto action_start = target.find_first_of("~!");
    const auto action = action_start == std::string_view::npos ? std::string_view() : target.substr(action_start);
    target = target.substr(0, action_start);
    if (target == "*" || target == this_rank) return action;
  }
  return std::nullopt;
}

// The points this thread passed since its current collective step began.
thread_local std::vector<std::string> passed_in_step;

}  // namespace

void begin_fault_step() { passed_in_step.clear(); }

void fault_point_after_step(std::string_view step, int rank) {
  for (const auto& p : passed_in_step)
    if (p == step) return;
  fault_point(step, rank);
}

void fault_point(std::string_view point, int rank) {
  bool known = false;
  for (const auto& p : passed_in_step) known = known || p == point;
  if (!known) passed_in_step.emplace_back(point);  // a step passes few distinct points
  const auto action = requested_action(point, rank);
  if (!action) return;
  if (action->empty()) throw Error("injected fault at " + std::string(point) + " on rank " + std::to_string(rank));
  if ((*action)[0] == '~') {
    std::this_thread::sleep_for(std::chrono::duration<double>(std::stod(std::string(action->substr(1)))));
    return;
  }
  if (*action == "!kill") {
    std::raise(SIGKILL);
    std::_Exit(137);  // not reached
  }
  if (*action == "!short") return;  // for short_write_requested
  throw UsageError("H5DCP_INJECT_FAULT: unknown action '" + std::string(*action) + "' at " + std::string(point));
}

bool short_write_requested(std::string_view point, int rank) {
  const auto action = requested_action(point, rank);
  return action && *action == "!short";
}

}  // namespace h5dcp::detail
