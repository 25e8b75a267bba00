#include "h5dcp/error.hpp"

#include <c10/util/Exception.h>

#include <sstream>

#include "core/exception_text.hpp"

namespace h5dcp {
namespace {

std::string describe(const std::string& step, const std::map<int, std::string>& failures) {
  std::ostringstream out;
  out << "h5dcp: step '" << step << "' failed on " << failures.size()
      << (failures.size() == 1 ? " rank" : " ranks") << ":";
  for (const auto& [rank, message] : failures) out << "\n  [rank " << rank << "] " << message;
  return out.str();
}

}  // namespace

CheckpointError::CheckpointError(std::string step, std::map<int, std::string> failures)
    : Error(describe(step, failures)), step_(std::move(step)), failures_(std::move(failures)) {}

namespace detail {

std::string exception_text(const std::exception& e) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e)) return torch_error->what_without_backtrace();
  return e.what();
}

}  // namespace detail
}  // namespace h5dcp
