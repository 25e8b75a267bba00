#pragma once
// h5dcp-plan-bench's save case: the planning of one save at scale, step by
// step as save() runs it (api/save_steps.cpp), without MPI: every rank's
// local plan checked and encoded, the coordinator's decode and merge of all
// of them (create_global_save_plan) and its encode, one rank's decode of the
// global plan and its own blocks (blocks_written_by); and the bytes each
// rank sends and receives.

#include <cstdint>

namespace h5dcp_bench {

/// Plans a save of `tensors` tensors [rows, 64] float32 (rows = 1-4 per
/// rank, by tensor), each row-sharded over `ranks` ranks; prints one line
/// per step and the bytes exchanged. Checks the global plan (every tensor
/// tiled by `ranks` chunks, each rank's blocks found); returns false after
/// saying what was wrong.
bool run_save_planning(std::int64_t ranks, std::int64_t tensors);

}  // namespace h5dcp_bench
