#pragma once
// Umbrella header: every public header of the checkpoint library h5dcp::h5dcp
// (a test checks that none is left out); the training utilities are
// h5dcp/training.hpp, in h5dcp::training. Programs that care about build time
// include the ones they use.

#include "h5dcp/async_save.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/checkpoint_manager.hpp"
#include "h5dcp/checkpoint_reader.hpp"
#include "h5dcp/dcp.hpp"
#include "h5dcp/dtype.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/file_kind.hpp"
#include "h5dcp/metadata.hpp"
#include "h5dcp/module.hpp"
#include "h5dcp/mpi_io.hpp"
#include "h5dcp/optimizer.hpp"
#include "h5dcp/options.hpp"
#include "h5dcp/plan.hpp"
#include "h5dcp/planner.hpp"
#include "h5dcp/progress.hpp"
#include "h5dcp/safetensors.hpp"
#include "h5dcp/save_plan_cache.hpp"
#include "h5dcp/sharded_tensor.hpp"
#include "h5dcp/state_dict.hpp"
#include "h5dcp/stateful.hpp"
#include "h5dcp/torch_save.hpp"
#include "h5dcp/verify.hpp"
#include "h5dcp/version.hpp"
