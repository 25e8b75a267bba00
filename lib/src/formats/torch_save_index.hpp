#pragma once
// A torch.save file's content as h5dcp sees it, without the tensor data: the
// containers, tensors (strided views of storages) and non-tensor values of
// its top-level dict, by fqn, and the storages they view. Built from the
// unpickled data.pkl by the one process that reads it, and encoded so it can
// share it with the others. No torch.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/byte_codec.hpp"
#include "formats/pickle_value.hpp"
#include "h5dcp/metadata.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

/// A storage record, data/<key>.
struct TorchStorageInfo {
  DType dtype = DType::UInt8;
  std::int64_t numel = 0;
  std::uint64_t data_offset = 0;  ///< where its bytes start in the file (records are stored uncompressed)
  std::uint32_t file = 0;         ///< which of TorchSaveIndex::files holds it (0: the one file)
};

/// A tensor: the view of storage `storage` with these offset, sizes and strides (in elements).
struct TorchTensorInfo {
  std::string storage;
  DType dtype = DType::Float32;
  std::int64_t storage_offset = 0;
  Shape sizes;
  Shape strides;
};

/// A non-tensor value, encoded as in the container (docs/FORMAT.md).
struct TorchValueInfo {
  std::string encoding;
  std::string payload;
};

/// One chunk of a tensor stored in pieces: the block `box` of the tensor is
/// the view `view` (of sizes box.sizes) of a storage.
struct TorchTensorChunk {
  ChunkStorageMetadata box;
  TorchTensorInfo view;
};

/// A tensor stored as chunks that tile it (a PyTorch DCP checkpoint's shards).
struct TorchChunkedTensor {
  DType dtype = DType::Float32;
  Shape size;
  std::vector<TorchTensorChunk> chunks;
};

struct TorchSaveIndex {
  std::map<std::string, ContainerKind> containers;   ///< fqn -> kind, every nested dict/list
  std::map<std::string, TorchTensorInfo> tensors;    ///< fqn -> view
  std::map<std::string, TorchValueInfo> values;      ///< fqn -> encoded value
  std::map<std::string, TorchStorageInfo> storages;  ///< key -> storage (those the tensors view)
  std::uint64_t file_size = 0;                       ///< bytes of the file the index was read from
  /// A source of several files (a sharded safetensors model): their paths and
  /// sizes, storages naming them by position. Empty: the one file the index
  /// was read from, of file_size bytes.
  std::vector<std::string> files;
  std::vector<std::uint64_t> file_sizes;
  /// Tensors stored in chunks, by fqn (none in a torch.save file or safetensors).
  std::map<std::string, TorchChunkedTensor> chunked;
};

/// The index of an unpickled torch.save object, whose top level must be a
/// dict. Keys must be str, int or bool (int and bool keys become their text,
/// "3" / "True"); tuples become lists; bytes become ByteString values.
/// Throws FormatError naming `what` and the fqn of anything else, and of an
/// index larger than `pickle_bytes` (the size of the pickle `root` was read
/// from) justifies: containers shared along many paths (see the .cpp).
TorchSaveIndex index_torch_save(const pickle::Object& root, const std::string& what, std::uint64_t pickle_bytes);

/// Indexes `object` (what index_torch_save takes for a value of its top-level
/// dict) as the entry `fqn` of `index`, with the same checks and budget.
void index_torch_object(const pickle::Object& object, const std::string& fqn, TorchSaveIndex& index,
                        const std::string& what, std::uint64_t pickle_bytes);

/// Boxes (offsets relative to the block, sizes) that cover a block of
/// `sizes` with elements of `element` bytes in pieces of at most `max_bytes`:
/// whole when it fits, else runs of slices along the outermost dimension
/// whose single slices fit. None for an empty block.
std::vector<ChunkStorageMetadata> split_block(const Shape& sizes, std::int64_t element, std::int64_t max_bytes);

/// Bytes of a tensor's elements (not of its storage).
std::int64_t tensor_bytes(const TorchTensorInfo& tensor);

Bytes encode(const TorchSaveIndex& index);
TorchSaveIndex decode_torch_save_index(std::string_view bytes);

/// The index as checkpoint metadata, every tensor one whole chunk: what load
/// planning checks a state dict against (torch.distributed.checkpoint's DynamicMetaLoadPlanner
/// built it from the state dict instead, and so checked nothing).
Metadata metadata_of(const TorchSaveIndex& index);

}  // namespace h5dcp::detail
