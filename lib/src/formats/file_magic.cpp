#include "formats/file_magic.hpp"

#include <cstring>

namespace h5dcp::detail {
namespace {

constexpr char kHdf5Signature[] = "\x89HDF\r\n\x1a\n";
// torch.save's legacy format starts with the pickle of its magic number
// 0x1950a86a20f9469cfc6c (PROTO n, LONG1 10 bytes).
constexpr unsigned char kLegacyMagic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

// A safetensors file starts with its header's size, little-endian, in 8
// bytes, and the header is a JSON object: a size within the 100 MB the
// safetensors package accepts, then '{'. A size past the end of the file
// still makes it one (a truncated or lying file, which the reader refuses
// saying so, rather than "unknown format").
bool looks_like_safetensors(std::string_view head, std::uint64_t file_size) {
  if (head.size() < 9 || file_size < 10) return false;
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(head[static_cast<std::size_t>(i)]);
  return n >= 2 && n <= 100'000'000 && head[8] == '{';
}

}  // namespace

FileMagic file_magic(std::string_view head, std::uint64_t file_size,
                     const std::function<std::string(std::uint64_t)>& read8) {
  if (head.compare(0, 4, "PK\x03\x04") == 0) return FileMagic::TorchSave;
  if (head.size() >= 2 + sizeof kLegacyMagic && static_cast<unsigned char>(head[0]) == 0x80 &&
      std::memcmp(head.data() + 2, kLegacyMagic, sizeof kLegacyMagic) == 0)
    return FileMagic::LegacyTorchSave;
  if (head.size() >= 262 && head.compare(257, 5, "ustar") == 0)
    return FileMagic::LegacyTorchSave;  // PyTorch < 0.4: tar
  // The HDF5 superblock is at 0 or after a user block of 512, 1024, 2048, ... bytes.
  for (std::uint64_t at = 0; at + 8 <= file_size; at = at == 0 ? 512 : at * 2) {
    if (read8(at) == std::string(kHdf5Signature, 8)) return FileMagic::Hdf5;
  }
  if (looks_like_safetensors(head, file_size)) return FileMagic::Safetensors;
  return FileMagic::Other;
}

}  // namespace h5dcp::detail
