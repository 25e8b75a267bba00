#include "storage/size_knob.hpp"

#include <cstdlib>

namespace h5dcp::detail {

std::int64_t size_knob_bytes(const char* variable, std::int64_t default_mib) noexcept {
  const char* text = std::getenv(variable);
  if (text == nullptr || *text == '\0') return default_mib << 20;
  char* end = nullptr;
  const long long mib = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || mib < 0 || mib > (1LL << 30)) return default_mib << 20;
  return static_cast<std::int64_t>(mib) << 20;
}

}  // namespace h5dcp::detail
