#pragma once
// The files an indexed source's tensors are read from (a torch.save file,
// safetensors files): opened by each rank for reads of its own blocks, and
// a block of a tensor read straight from its storage's bytes.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/torch_save_index.hpp"
#include "storage/file_descriptor.hpp"

namespace h5dcp::detail {

/// One source file, checked to be the file the coordinator indexed (its size).
class SourceFile {
 public:
  /// Throws IoError when `path` cannot be opened, UsageError when its size
  /// is not `expected_size` (another file than the coordinator's).
  SourceFile(const std::string& path, std::uint64_t expected_size);
  SourceFile(const SourceFile&) = delete;
  SourceFile& operator=(const SourceFile&) = delete;

  /// Reads `size` bytes at `offset`; throws IoError, or FormatError at the end of the file.
  void read(void* out, std::size_t size, std::uint64_t offset) const;

 private:
  std::string path_;
  FileDescriptor fd_;
};

/// Every file of a source: `src` itself when the index lists no files,
/// else the files it lists.
class SourceFiles {
 public:
  SourceFiles(const std::string& src, const TorchSaveIndex& index);
  const SourceFile& of(const TorchStorageInfo& storage) const { return *files_.at(storage.file); }

 private:
  std::vector<std::unique_ptr<SourceFile>> files_;
};

/// The whole file `path` (an index, a DCP .metadata), of at most
/// `max_bytes`: a larger one is a FormatError naming it as `what` ("a
/// safetensors index"). Throws IoError when it cannot be read.
std::string read_small_file(const std::string& path, std::uint64_t max_bytes, const std::string& what);

/// The block `box` of `tensor`, read straight from its storage's bytes: the
/// span of storage elements the block touches, viewed with the tensor's
/// strides, as a new contiguous CPU tensor.
at::Tensor read_block(const SourceFile& file, const TorchStorageInfo& storage, const TorchTensorInfo& tensor,
                      const ChunkStorageMetadata& box);

}  // namespace h5dcp::detail
