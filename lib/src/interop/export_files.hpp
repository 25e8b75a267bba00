#pragma once
// What the exports of a checkpoint to other formats share (safetensors,
// DCP): reading a block of a tensor with its checksums checked, and
// retiring the directory an earlier export left where a new one goes.

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <string_view>

#include "hdf5/container_reader.hpp"

namespace h5dcp::detail {

/// The block `box` of the tensor `fqn` of the checkpoint `reader` reads
/// (`index`: its index), as a new contiguous CPU tensor; checksums are
/// checked where the file has them. Takes the HDF5 gate itself. Throws
/// ChecksumError, FormatError or IoError naming the tensor.
at::Tensor read_checked_block(ContainerReader& reader, const CheckpointIndex& index, const std::string& fqn,
                              const ChunkStorageMetadata& box);

/// Creates the file `path` (which must not exist), writes `bytes` into it and
/// fsyncs it: an export's small files (an index, DCP's .metadata). Throws
/// IoError naming the path.
void write_new_file_synced(const std::string& path, std::string_view bytes);

/// Moves the directory `dst` aside (rename(2) does not replace a non-empty
/// directory), removes the files in it for which `ours` holds, and removes
/// it when nothing else is left. Never throws: a directory it cannot
/// retire is left where it was, and the rename that follows says so.
void retire_directory(const std::string& dst, const std::function<bool(const std::string& name)>& ours) noexcept;

}  // namespace h5dcp::detail
