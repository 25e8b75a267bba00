#pragma once
// Umbrella header: everything a user of h5dcp needs.

#include "h5dcp/async_save.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/dtype.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/metadata.hpp"
#include "h5dcp/mpi_io.hpp"
#include "h5dcp/options.hpp"
#include "h5dcp/planner.hpp"
#include "h5dcp/sharded_tensor.hpp"
#include "h5dcp/state_dict.hpp"
#include "h5dcp/stateful.hpp"
#include "h5dcp/version.hpp"
