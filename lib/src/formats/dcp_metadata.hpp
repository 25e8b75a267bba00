#pragma once
// A PyTorch DCP checkpoint directory's `.metadata`, as h5dcp reads and
// writes it: the pickle of torch.distributed.checkpoint.metadata.Metadata
// that FileSystemWriter writes beside its `.distcp` data files. Each tensor
// is a list of chunks (boxes of the global tensor), each chunk and each
// non-tensor value one item: a torch.save archive at a byte range of a data
// file. Read with the pickle reader's closed list of DCP classes
// (pickle_reader.hpp), never with Python's pickle. Pure data: no torch.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "h5dcp/dtype.hpp"
#include "h5dcp/metadata.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

/// The metadata version h5dcp reads and writes (PyTorch 2.13 writes "1.0.0").
inline constexpr const char* kDcpMetadataVersion = "1.0.0";

/// Where an item's bytes are: `length` bytes at `offset` of the data file
/// `relative_path` (a file name in the checkpoint directory).
struct DcpItem {
  std::string relative_path;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct DcpChunk {
  ChunkStorageMetadata box;
  DcpItem item;
};

struct DcpTensor {
  DType dtype = DType::Float32;
  Shape size;
  std::vector<DcpChunk> chunks;  ///< checked to tile `size` exactly
};

/// One step of a key's path in the state dict: a dict key, or a list index.
struct DcpPathStep {
  bool is_index = false;
  std::string key;         ///< a dict key
  std::int64_t index = 0;  ///< a list index
};

struct DcpMetadata {
  std::string version;                       ///< empty: the file names none
  std::map<std::string, DcpTensor> tensors;  ///< by DCP key ("model.layer.weight")
  std::map<std::string, DcpItem> values;     ///< non-tensor values (BytesStorageMetadata), by DCP key
  /// planner_data: each key's path through nested dicts and lists, as
  /// DCP's flatten_state_dict recorded it; a key without one is a top-level key.
  std::map<std::string, std::vector<DcpPathStep>> paths;
};

/// Reads `.metadata` (`what` names it in errors). Throws FormatError naming
/// what is wrong: a class or function outside DCP's metadata classes, a
/// version other than kDcpMetadataVersion, a dtype h5dcp does not store, a
/// sparse layout, chunks that do not tile their tensor, an item whose data
/// file is not a plain file name or whose bytes are transformed (compressed).
DcpMetadata read_dcp_metadata(std::string_view pickle, const std::string& what);

/// The `.metadata` pickle of `metadata` (chunks' items filled in), as
/// PyTorch's pickle.dump writes it, for torch.distributed.checkpoint.load.
std::string write_dcp_metadata(const DcpMetadata& metadata);

}  // namespace h5dcp::detail
