#pragma once
// What a node-local tier's copy holds, for verify and the CLI.

#include "h5dcp/verify.hpp"
#include "hdf5/local_file.hpp"

namespace h5dcp::detail {

/// The summary of a copy with identity `id` and chunk owners `owners`
/// (read_checkpoint_file_index): its identity, and how many of its chunks
/// are its owner's. Pure.
LocalCopySummary summarize_local_copy(const LocalFileIdentity& id, const ChunkOwners& owners);

}  // namespace h5dcp::detail
