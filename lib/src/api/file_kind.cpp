// detect_file_kind(): a file's kind from its first bytes.

#include "h5dcp/file_kind.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "comm/comm.hpp"
#include "h5dcp/error.hpp"
#include "hdf5/attributes.hpp"
#include "hdf5/container_layout.hpp"
#include "hdf5/hdf5_access.hpp"
#include "hdf5/hdf5_file.hpp"
#include "storage/file_descriptor.hpp"

namespace h5dcp {
namespace {

// Reads up to `n` bytes at `offset`; fewer at the end of the file.
std::string read_at(int fd, std::uint64_t offset, std::size_t n, const std::string& path) {
  std::string out(n, '\0');
  std::size_t got = 0;
  while (got < n) {
    const auto r = ::pread(fd, out.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw IoError("h5dcp: reading '" + path + "' failed: " + std::strerror(errno));
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  out.resize(got);
  return out;
}

constexpr char kHdf5Signature[] = "\x89HDF\r\n\x1a\n";
// torch.save's legacy format starts with the pickle of its magic number
// 0x1950a86a20f9469cfc6c (PROTO n, LONG1 10 bytes).
constexpr unsigned char kLegacyMagic[] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

// A safetensors file starts with its header's size, little-endian, in 8
// bytes, and the header is a JSON object: a size within the 100 MB the
// safetensors package accepts, then '{'. A size past the end of the file
// still makes it one (a truncated or lying file, which the reader refuses
// saying so, rather than "unknown format").
bool looks_like_safetensors(const std::string& head, std::uint64_t file_size) {
  if (head.size() < 9 || file_size < 10) return false;
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(head[static_cast<std::size_t>(i)]);
  return n >= 2 && n <= 100'000'000 && head[8] == '{';
}

bool is_h5dcp(const std::string& path) {
  detail::Hdf5Access access;  // HDF5 is not thread-safe: see core/hdf5_gate.hpp
  try {
    auto file = detail::open_file_read_only(path, MPI_COMM_NULL);
    const bool marked = detail::has_attribute(file.get(), detail::layout::kFormatVersion);
    file.close("'" + path + "'");
    return marked;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

FileKind detect_file_kind(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw IoError("h5dcp: '" + path + "': " + std::strerror(errno));
  if (!S_ISREG(info.st_mode)) throw IoError("h5dcp: '" + path + "' is not a regular file");
  const auto file = detail::FileDescriptor::open(path, O_RDONLY);
  const int fd = file.get();

  const auto head = read_at(fd, 0, 512, path);
  if (head.compare(0, 4, "PK\x03\x04") == 0) return FileKind::TorchSave;
  if (head.size() >= 2 + sizeof kLegacyMagic && static_cast<unsigned char>(head[0]) == 0x80 &&
      std::memcmp(head.data() + 2, kLegacyMagic, sizeof kLegacyMagic) == 0)
    return FileKind::LegacyTorchSave;
  if (head.size() >= 262 && head.compare(257, 5, "ustar") == 0) return FileKind::LegacyTorchSave;  // PyTorch < 0.4: tar
  // The HDF5 superblock is at 0 or after a user block of 512, 1024, 2048, ... bytes.
  const auto size = static_cast<std::uint64_t>(info.st_size);
  for (std::uint64_t at = 0; at + 8 <= size; at = at == 0 ? 512 : at * 2) {
    if (read_at(fd, at, 8, path) == std::string(kHdf5Signature, 8))
      return is_h5dcp(path) ? FileKind::H5dcpCheckpoint : FileKind::Hdf5;
  }
  if (looks_like_safetensors(head, size)) return FileKind::Safetensors;
  return FileKind::Other;
}

FileKind detect_file_kind(const std::string& path, MPI_Comm comm) {
  const detail::Comm c(comm);
  c.require_same("detect_file_kind", {{"path", "'" + path + "'"}});
  FileKind kind = FileKind::Other;
  if (auto failure = c.require_visible("detect_file_kind", path, [&] { kind = detect_file_kind(path); }))
    std::rethrow_exception(failure);
  // Seen everywhere: the same file, or files of one kind on node-local disks?
  std::string kinds;
  for (const auto& k : c.all_gather(detail::Bytes(1, static_cast<char>(kind)))) kinds += k;
  const auto reference = static_cast<FileKind>(kinds.at(static_cast<std::size_t>(c.coordinator())));
  for (std::size_t rank = 0; rank < kinds.size(); ++rank)
    if (static_cast<FileKind>(kinds[rank]) != reference)
      throw IoError("h5dcp: detect_file_kind: '" + path + "' is not the same file on every rank (rank " +
                    std::to_string(rank) + " sees a " + std::string(describe(static_cast<FileKind>(kinds[rank]))) +
                    ", rank " + std::to_string(c.coordinator()) + " a " + std::string(describe(reference)) +
                    "): use a shared file system");
  return kind;
}

std::string_view describe(FileKind kind) noexcept {
  switch (kind) {
    case FileKind::TorchSave: return "torch.save file";
    case FileKind::LegacyTorchSave: return "legacy torch.save file";
    case FileKind::H5dcpCheckpoint: return "h5dcp checkpoint";
    case FileKind::Hdf5: return "HDF5 file (not an h5dcp checkpoint)";
    case FileKind::Other: return "file of an unknown format";
    case FileKind::Safetensors: return "safetensors file";
  }
  return "file of an unknown format";
}

}  // namespace h5dcp
