#include "interop/shared/export_files.hpp"

#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "api/verified_read.hpp"
#include "h5dcp/error.hpp"
#include "hdf5/hdf5_access.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/row_split.hpp"
#include "plan/staging_pieces.hpp"
#include "storage/durable_file.hpp"
#include "storage/file_descriptor.hpp"
#include "torch/dtype_mapping.hpp"

namespace h5dcp::detail {

ExportSource::ExportSource(const std::string& path) {
  Hdf5Access access;
  index_ = read_container_index(path);
  reader_.emplace(path, MPI_COMM_NULL);
}

ExportSource::~ExportSource() {
  if (!reader_) return;
  try {
    Hdf5Access access;
    reader_.reset();
  } catch (...) {
    // The gate refuses only a thread that holds it already (an export from
    // inside another h5dcp call, which the constructor refused too): HDF5
    // is this thread's then.
    reader_.reset();
  }
}

void ExportSource::close() {
  if (!reader_) return;  // closed already
  Hdf5Access access;
  reader_->close();
  reader_.reset();
}

void ExportSource::read_in_pieces(
    const std::string& fqn, const ChunkStorageMetadata& rows,
    const std::function<void(const ChunkStorageMetadata& piece, const at::Tensor& bytes)>& use) {
  const auto& storage = std::get<TensorStorageMetadata>(index_.metadata.state_dict_metadata.at(fqn));
  const auto element = static_cast<std::int64_t>(dtype_size(storage.properties.dtype));
  const auto piece_bytes = std::max(kExportPieceBytes, row_bytes(rows.sizes, element));
  for (const auto& piece : split_block(rows, element, piece_bytes)) use(piece, read_checked(storage, fqn, piece));
}

at::Tensor ExportSource::read_checked(const TensorStorageMetadata& storage, const std::string& fqn,
                                      const ChunkStorageMetadata& box) {
  auto out = at::empty(box.sizes, at::TensorOptions().dtype(to_scalar_type(storage.properties.dtype)));
  Hdf5Access access;
  const auto sums = index_.checksums.find(fqn);
  if (sums == index_.checksums.end()) {
    reader_->read(fqn, storage.properties.dtype, box, out.data_ptr());
    return out;
  }
  ReadItem item;
  item.dest_index = MetadataIndex{fqn, std::nullopt, std::nullopt};
  item.dest_offsets = Shape(box.offsets.size(), 0);
  item.storage_fqn = fqn;
  item.storage_offsets = box.offsets;
  item.lengths = box.sizes;
  item.dtype = storage.properties.dtype;
  for (std::size_t c = 0; c < storage.chunks.size(); ++c)
    if (intersect(storage.chunks[c], box)) item.source_chunks.push_back(c);
  read_verified(*reader_, item, out, storage, sums->second);
  return out;
}

void write_new_file_synced(const std::string& path, std::string_view bytes) {
  auto fd = FileDescriptor::open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (const int error = write_fully(fd.get(), bytes.data(), bytes.size()))
    throw IoError("h5dcp: writing '" + path + "' failed: " + std::strerror(error));
  if (::fsync(fd.get()) != 0) throw IoError("h5dcp: fsync of '" + path + "' failed: " + std::strerror(errno));
}

}  // namespace h5dcp::detail
