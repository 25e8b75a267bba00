#include "base/exception_text.hpp"

namespace h5dcp::detail {
namespace {

ExceptionDescriber installed_describer = nullptr;

}  // namespace

std::string exception_text(const std::exception& e) {
  std::string text;
  if (installed_describer != nullptr && installed_describer(e, text)) return text;
  return e.what();
}

void set_exception_describer(ExceptionDescriber describer) noexcept { installed_describer = describer; }

}  // namespace h5dcp::detail
