#pragma once
// Progress of long operations (conversions, verification), for callers that
// show it; h5dcp itself never prints progress.

#include <cstdint>
#include <functional>
#include <string>

namespace h5dcp {

struct Progress {
  std::int64_t items_done = 0;   ///< tensors finished so far
  std::int64_t items_total = 0;  ///< tensors in all (0 when unknown)
  std::int64_t bytes_done = 0;   ///< tensor bytes finished so far
  std::int64_t bytes_total = 0;  ///< tensor bytes in all (0 when unknown)
  std::string current;           ///< the fqn just finished
};

/// Called on the calling thread after each tensor; it must not throw.
using ProgressCallback = std::function<void(const Progress&)>;

}  // namespace h5dcp
