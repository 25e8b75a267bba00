#pragma once
// A conversion into a checkpoint from any source an index describes: files
// whose tensors are (strided views of) byte ranges at known offsets, as
// torch.save's storage records and safetensors' data sections are. The
// coordinator builds the index once; every rank then reads straight from
// the source files only the blocks it writes (torch_save/convert.cpp).

#include <mpi.h>

#include <functional>
#include <string>

#include "base/byte_codec.hpp"
#include "h5dcp/torch_save.hpp"

namespace h5dcp::detail {

/// Converts into the checkpoint `dst`. Collective over `comm`: `read_index`
/// runs on the coordinator alone and returns an encoded TorchSaveIndex
/// (torch_save_index.hpp); `src` is the source's one file, used when the
/// index lists no files of its own. Throws CheckpointError on every rank.
SaveResult convert_index_to_checkpoint(const std::function<Bytes()>& read_index, const std::string& src,
                                       const std::string& dst, const TorchSaveToCheckpointOptions& options,
                                       MPI_Comm comm);

}  // namespace h5dcp::detail
