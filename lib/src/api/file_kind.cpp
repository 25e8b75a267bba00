// detect_file_kind(): a file's kind from its first bytes.

#include "h5dcp/file_kind.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "comm/comm.hpp"
#include "formats/file_magic.hpp"
#include "h5dcp/error.hpp"
#include "hdf5/attributes.hpp"
#include "hdf5/container_layout.hpp"
#include "hdf5/hdf5_access.hpp"
#include "hdf5/hdf5_file.hpp"
#include "storage/file_descriptor.hpp"

namespace h5dcp {
namespace {

// Up to `n` bytes at `offset`; fewer at the end of the file.
std::string read_at(int fd, std::uint64_t offset, std::size_t n, const std::string& path) {
  std::string out(n, '\0');
  out.resize(detail::read_at(fd, out.data(), n, offset, path));
  return out;
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
  const auto size = static_cast<std::uint64_t>(info.st_size);
  switch (detail::file_magic(head, size, [&](std::uint64_t at) { return read_at(fd, at, 8, path); })) {
    case detail::FileMagic::TorchSave: return FileKind::TorchSave;
    case detail::FileMagic::LegacyTorchSave: return FileKind::LegacyTorchSave;
    case detail::FileMagic::Hdf5: return is_h5dcp(path) ? FileKind::H5dcpCheckpoint : FileKind::Hdf5;
    case detail::FileMagic::Safetensors: return FileKind::Safetensors;
    case detail::FileMagic::Other: break;
  }
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
