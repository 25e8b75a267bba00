#pragma once
// Umbrella header of the library h5dcp::training (link it; it links h5dcp):
// PyTorch's torch.distributed utilities for LibTorch and the rank -> GPU
// mapping (a test checks that no header of h5dcp/training/ is left out).

#include "h5dcp/training/device.hpp"
#include "h5dcp/training/module_sync.hpp"
#include "h5dcp/training/utils.hpp"
