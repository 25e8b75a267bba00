#pragma once
// The names a manager gives its steps: `prefix`, the step in 8 digits or
// more, `suffix` ("step-00000100.h5" in the shared directory,
// "local-step-00000100" in a node's local directory), and back.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace h5dcp::detail {

std::string step_name(std::string_view prefix, std::int64_t step, std::string_view suffix);

/// The step of `name` when it is exactly step_name(prefix, step, suffix).
std::optional<std::int64_t> step_of_name(const std::string& name, std::string_view prefix, std::string_view suffix);

/// The steps of the names in `dir` that are step names, ascending. Throws IoError.
std::vector<std::int64_t> list_step_names(const std::string& dir, std::string_view prefix, std::string_view suffix);

}  // namespace h5dcp::detail
