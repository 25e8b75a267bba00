#include "manager/step_names.hpp"

#include <algorithm>
#include <cstdio>

#include "storage/checkpoint_directory.hpp"

namespace h5dcp::detail {

std::string step_name(std::string_view prefix, std::int64_t step, std::string_view suffix) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%08lld", static_cast<long long>(step));
  std::string name(prefix);
  name.append(digits).append(suffix);
  return name;
}

std::optional<std::int64_t> step_of_name(const std::string& name, std::string_view prefix, std::string_view suffix) {
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const auto digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  const auto step = static_cast<std::int64_t>(std::stoll(digits));
  if (step_name(prefix, step, suffix) != name) return std::nullopt;
  return step;
}

std::vector<std::int64_t> list_step_names(const std::string& dir, std::string_view prefix, std::string_view suffix) {
  std::vector<std::int64_t> steps;
  for (const auto& name : list_names(dir))
    if (const auto step = step_of_name(name, prefix, suffix)) steps.push_back(*step);
  std::sort(steps.begin(), steps.end());
  return steps;
}

}  // namespace h5dcp::detail
