#pragma once
// What a file's leading bytes say it is: the magic numbers of torch.save
// (zip, legacy pickle, tar), HDF5 and safetensors. The caller reads the
// bytes; api/file_kind.cpp also opens an HDF5 file to tell an h5dcp
// checkpoint from other HDF5.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace h5dcp::detail {

enum class FileMagic { TorchSave, LegacyTorchSave, Hdf5, Safetensors, Other };

/// The kind that `head` (a file's first 512 bytes, or all of a shorter
/// file) shows, for a file of `file_size` bytes. `read8(offset)` returns the
/// 8 bytes at `offset` (fewer at the end), where an HDF5 superblock may be.
FileMagic file_magic(std::string_view head, std::uint64_t file_size,
                     const std::function<std::string(std::uint64_t)>& read8);

}  // namespace h5dcp::detail
