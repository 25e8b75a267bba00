#pragma once
// Lists in messages: "n0, n1, n2".

#include <string>
#include <vector>

namespace h5dcp::detail {

/// `items` joined by ", ".
inline std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

}  // namespace h5dcp::detail
