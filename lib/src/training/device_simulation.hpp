// For tests on machines without a GPU: the device count a rank's device line
// pretends to see (H5DCP_TEST_CUDA_DEVICE_COUNT), so that a multi-node test
// can check which GPU each rank would take from what Slurm gave it.

#pragma once

#include <optional>

#include "h5dcp/training/device.hpp"

namespace h5dcp::detail {

/// The variable's name.
inline constexpr const char* kTestDeviceCountVariable = "H5DCP_TEST_CUDA_DEVICE_COUNT";

/// H5DCP_TEST_CUDA_DEVICE_COUNT from `env` (a count from 1 to 64) where
/// LibTorch sees no GPU (`device_count` 0); nullopt otherwise, also for a
/// value that is not such a count. Pure, never throws.
std::optional<int> simulated_device_count(int device_count, const Environment& env) noexcept;

}  // namespace h5dcp::detail
