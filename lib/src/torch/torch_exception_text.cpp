// Installs the describer base/exception_text.hpp uses for LibTorch's errors:
// c10::Error's message without its C++ backtrace. Installed when the library
// is loaded (a static initializer), so every layer's messages get it.

#include <c10/util/Exception.h>

#include "base/exception_text.hpp"

namespace h5dcp::detail {
namespace {

bool describe_torch_error(const std::exception& e, std::string& text) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  if (torch_error == nullptr) return false;
  text = torch_error->what_without_backtrace();
  return true;
}

[[maybe_unused]] const bool installed = (set_exception_describer(&describe_torch_error), true);

}  // namespace
}  // namespace h5dcp::detail
