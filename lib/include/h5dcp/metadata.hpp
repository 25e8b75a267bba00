#pragma once
// The checkpoint metadata model (PyTorch DCP's metadata.py): what a checkpoint
// holds, independent of how it is stored. Plain data, no torch, no HDF5.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "h5dcp/dtype.hpp"

namespace h5dcp {

/// Identifies one item of a state dict: a whole value (`offset` empty) or the
/// shard of a sharded tensor that starts at `offset`. `index` is a hint (the
/// shard's position in its list) that makes lookups O(1) when it is right;
/// lookups fall back to a search when it is wrong.
struct MetadataIndex {
  std::string fqn;
  std::optional<std::vector<std::int64_t>> offset;
  std::optional<std::size_t> index;

  friend bool operator==(const MetadataIndex& a, const MetadataIndex& b) {
    return a.fqn == b.fqn && a.offset == b.offset;  // the hint is not identity
  }
};

/// A container of a nested state dict.
enum class ContainerKind : std::uint8_t { Dict, List };

/// An N-d block of a tensor: global offsets and sizes, one per dimension.
struct ChunkStorageMetadata {
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> sizes;

  friend bool operator==(const ChunkStorageMetadata& a, const ChunkStorageMetadata& b) {
    return a.offsets == b.offsets && a.sizes == b.sizes;
  }
};

/// Properties of a stored tensor besides its shape.
struct TensorProperties {
  DType dtype = DType::Float32;

  friend bool operator==(const TensorProperties& a, const TensorProperties& b) { return a.dtype == b.dtype; }
};

/// A tensor as saved: global size and the chunks it was written in (one per
/// unique shard at save time; one chunk covering everything for a replicated
/// tensor).
struct TensorStorageMetadata {
  TensorProperties properties;
  std::vector<std::int64_t> size;
  std::vector<ChunkStorageMetadata> chunks;
};

/// A non-tensor value (docs/FORMAT.md, "Non-tensor values").
struct BytesStorageMetadata {
  std::string encoding;   ///< "none", "int", "float", "bool", "str", "bytes" or "pickle"
  std::int64_t size = 0;  ///< bytes of its encoded payload
};

using StorageMetadata = std::variant<TensorStorageMetadata, BytesStorageMetadata>;

/// Everything a reader needs to plan a load, read once by the coordinator and
/// shared with every rank.
struct Metadata {
  int format_version_major = 0;
  int format_version_minor = 0;
  std::string library_version;                                 ///< h5dcp version that wrote the checkpoint
  int world_size = 0;                                          ///< ranks that saved it
  std::string created;                                         ///< ISO-8601 UTC time of the save
  std::map<std::string, StorageMetadata> state_dict_metadata;  ///< fqn -> storage, every leaf
  std::map<std::string, ContainerKind> containers;             ///< fqn -> kind, every nested dict/list
};

/// The tensor metadata of `fqn`; throws UsageError naming the key when it is
/// absent or not a tensor. Not collective.
const TensorStorageMetadata& find_tensor_metadata(const Metadata& metadata, const std::string& fqn);

}  // namespace h5dcp
