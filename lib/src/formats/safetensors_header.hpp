#pragma once
// The safetensors format (Hugging Face), without the tensor data: an 8-byte
// little-endian header size N, N bytes of JSON
//   {"__metadata__": {"k": "v"}, "name": {"dtype": "F32", "shape": [2, 3],
//    "data_offsets": [begin, end]}, ...}
// padded with spaces, then the data: every tensor's row-major little-endian
// bytes at [begin, end) of it, the ranges tiling it without gap or overlap.
// Parsing checks all of that, as the safetensors package does, before any
// byte of data is trusted: a header that lies about its offsets or length
// is a FormatError naming the file and the tensor. No torch, no MPI.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "h5dcp/dtype.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {

// hostile-input limit: the largest header accepted, as the safetensors
// package's own (100 MB): a header is read whole into memory.
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  std::uint64_t begin = 0;  ///< offset of its bytes in the data section
  std::uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsTensor> tensors;  ///< in data order (by begin)
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;  ///< 8 + N: where the data section starts in the file
  std::uint64_t file_size = 0;
};

/// The safetensors name of a dtype ("F32", "BF16", "F8_E4M3", ...), or
/// nullopt for the dtypes safetensors has no name for (complex32, complex128).
std::optional<std::string_view> safetensors_dtype_name(DType dtype) noexcept;
std::optional<DType> dtype_from_safetensors(std::string_view name) noexcept;

/// Parses and checks the JSON header `json` of a file whose data section has
/// `data_bytes` bytes. `what` names the file in messages. Throws FormatError.
SafetensorsHeader parse_safetensors_header(std::string_view json, std::uint64_t data_bytes, const std::string& what);

/// Reads and checks the header of the safetensors file at `path`. Throws
/// IoError when it cannot be read, FormatError when it is not a valid
/// safetensors file.
SafetensorsHeader read_safetensors_header(const std::string& path);

/// The 8-byte size and the JSON header for `tensors` (their offsets already
/// laid out) and `metadata`, padded with spaces so that the data starts at a
/// multiple of 8 bytes.
std::string compose_safetensors_header(const std::vector<SafetensorsTensor>& tensors,
                                       const std::map<std::string, std::string>& metadata);

/// The weight map of a `model.safetensors.index.json`: tensor name -> shard
/// file name. Shard names must be plain file names in the index's directory
/// (no '/', not "." or ".."). Throws FormatError naming `what`.
std::map<std::string, std::string> parse_safetensors_index(std::string_view json, const std::string& what);

/// The text of a `model.safetensors.index.json` for `weight_map` and the
/// total tensor bytes.
std::string compose_safetensors_index(const std::map<std::string, std::string>& weight_map, std::uint64_t total_size);

}  // namespace h5dcp::detail
