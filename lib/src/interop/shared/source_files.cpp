// SourceFile, SourceFiles and read_block (source_files.hpp).

#include "interop/shared/source_files.hpp"

#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>

#include "h5dcp/error.hpp"
#include "plan/chunk_geometry.hpp"
#include "torch/dtype_mapping.hpp"

namespace h5dcp::detail {

SourceFile::SourceFile(const std::string& path, std::uint64_t expected_size) : path_(path) {
  try {
    fd_ = open_input_file(path, "a source file");
  } catch (const IoError& e) {
    throw IoError(std::string(e.what()) +
                  " (every rank reads its blocks from the source: it must be on a shared file system)");
  }
  struct stat info {};
  if (::fstat(fd_.get(), &info) != 0 || static_cast<std::uint64_t>(info.st_size) != expected_size) {
    throw UsageError("h5dcp: '" + path +
                     "' is not the file the coordinator read (its size differs): every rank "
                     "must see the same file");
  }
}

std::string read_small_file(const std::string& path, std::uint64_t max_bytes, const std::string& what) {
  const auto fd = open_input_file(path, what);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw_errno("reading '" + path + "'", errno);
  const auto size = static_cast<std::uint64_t>(info.st_size);
  if (size > max_bytes)
    throw FormatError("h5dcp: '" + path + "' is too large for " + what + " (" + std::to_string(size) +
                      " bytes; the limit is " + std::to_string(max_bytes) + ")");
  std::string text(static_cast<std::size_t>(size), '\0');
  if (read_at(fd.get(), text.data(), text.size(), 0, path) != text.size()) throw_errno("reading '" + path + "'", EIO);
  return text;
}

void SourceFile::read(void* out, std::size_t size, std::uint64_t offset) const {
  if (read_at(fd_.get(), out, size, offset, path_) != size)
    throw FormatError("h5dcp: '" + path_ + "' ends before the data of a storage");
}

SourceFiles::SourceFiles(const std::string& src, const TorchSaveIndex& index) {
  if (index.files.empty()) {
    files_.push_back(std::make_unique<SourceFile>(src, index.file_size));
    return;
  }
  for (std::size_t i = 0; i < index.files.size(); ++i)
    files_.push_back(std::make_unique<SourceFile>(index.files[i], index.file_sizes.at(i)));
}

at::Tensor read_block(const SourceFile& file, const TorchStorageInfo& storage, const TorchTensorInfo& tensor,
                      const ChunkStorageMetadata& box) {
  const auto options = at::TensorOptions().dtype(to_scalar_type(tensor.dtype));
  if (volume(box.sizes) == 0) return at::empty(box.sizes, options);
  std::int64_t first = tensor.storage_offset;
  for (std::size_t d = 0; d < box.offsets.size(); ++d) first += box.offsets[d] * tensor.strides[d];
  std::int64_t last = first;
  for (std::size_t d = 0; d < box.sizes.size(); ++d) last += (box.sizes[d] - 1) * tensor.strides[d];
  const auto element = static_cast<std::int64_t>(dtype_size(tensor.dtype));
  auto span = at::empty({last - first + 1}, options);
  file.read(span.data_ptr(), static_cast<std::size_t>((last - first + 1) * element),
            storage.data_offset + static_cast<std::uint64_t>(first * element));
  return span.as_strided(box.sizes, tensor.strides, 0).contiguous();
}

}  // namespace h5dcp::detail
