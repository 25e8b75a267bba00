#pragma once
// safetensors files as an indexed source (torch_save_index.hpp): the
// headers read and checked, names mapped to the nested tree (split at '/',
// each key escaped), the header's __metadata__ as a dict of str values.

#include <string>

#include "formats/torch_save_index.hpp"

namespace h5dcp::detail {

/// The index of `src`: a .safetensors file, a *.json index with its shards
/// beside it, or a directory holding model.safetensors.index.json or
/// model.safetensors. Throws FormatError for files that are not valid
/// safetensors (naming the file and tensor), IoError when they cannot be
/// read, UsageError for a directory without either.
TorchSaveIndex safetensors_index(const std::string& src);

}  // namespace h5dcp::detail
