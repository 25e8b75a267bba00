// CheckpointReader: one process reading a checkpoint piece by piece.

#include "h5dcp/checkpoint_reader.hpp"

#include <ATen/ops/empty.h>

#include <optional>

#include "h5dcp/error.hpp"
#include "hdf5/container_reader.hpp"
#include "hdf5/hdf5_access.hpp"
#include "plan/chunk_geometry.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/value_codec.hpp"

namespace h5dcp {

// Every member function that calls HDF5 holds the HDF5 gate for the call
// (an async save may be writing from another thread), not for the reader's
// life: a thread holding a reader may still save or load.
struct CheckpointReader::Impl {
  explicit Impl(const std::string& p) : path(p) {
    detail::Hdf5Access access;
    index = detail::read_container_index(p);
    reader.emplace(p, MPI_COMM_NULL);
  }
  ~Impl() {
    if (!reader) return;
    try {
      detail::Hdf5Access access;
      reader.reset();  // closes the file, silently
    } catch (...) {
      // The gate refused: this thread holds it already (a reader dropped from
      // inside another h5dcp call), so closing below is safe as it is.
    }
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  std::string path;
  detail::CheckpointIndex index;
  std::optional<detail::ContainerReader> reader;
  bool open = true;
};

CheckpointReader::CheckpointReader(const std::string& path) : impl_(std::make_unique<Impl>(path)) {}
CheckpointReader::~CheckpointReader() = default;
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;

const std::string& CheckpointReader::path() const noexcept { return impl_->path; }
const Metadata& CheckpointReader::metadata() const noexcept { return impl_->index.metadata; }

StateValue CheckpointReader::value(const std::string& fqn) const {
  const auto& md = impl_->index.metadata.state_dict_metadata;
  const auto it = md.find(fqn);
  const auto* storage = it == md.end() ? nullptr : std::get_if<BytesStorageMetadata>(&it->second);
  if (storage == nullptr) throw UsageError("h5dcp: '" + impl_->path + "' has no non-tensor value '" + fqn + "'");
  return detail::decode_value(storage->encoding, impl_->index.values.at(fqn), fqn);
}

at::Tensor CheckpointReader::read_tensor(const std::string& fqn) {
  const auto& t = find_tensor_metadata(impl_->index.metadata, fqn);
  return read_block(fqn, ChunkStorageMetadata{detail::Shape(t.size.size(), 0), t.size});
}

at::Tensor CheckpointReader::read_block(const std::string& fqn, const ChunkStorageMetadata& box) {
  if (!impl_->open) throw UsageError("h5dcp: the reader of '" + impl_->path + "' is closed");
  const auto& t = find_tensor_metadata(impl_->index.metadata, fqn);
  bool inside = box.offsets.size() == t.size.size() && box.sizes.size() == t.size.size();
  for (std::size_t d = 0; inside && d < t.size.size(); ++d)
    inside = box.offsets[d] >= 0 && box.sizes[d] >= 0 && box.offsets[d] <= t.size[d] &&
             box.sizes[d] <= t.size[d] - box.offsets[d];  // no overflow for huge boxes
  if (!inside)
    throw UsageError("h5dcp: block " + detail::describe_box(box) + " is not inside '" + fqn + "' of shape " +
                     detail::describe_shape(t.size));
  auto out = at::empty(box.sizes, at::TensorOptions().dtype(detail::to_scalar_type(t.properties.dtype)));
  detail::Hdf5Access access;
  impl_->reader->read(fqn, t.properties.dtype, box, out.data_ptr());
  return out;
}

void CheckpointReader::close() {
  if (!impl_->open) return;
  impl_->open = false;
  detail::Hdf5Access access;
  impl_->reader->close();
}

}  // namespace h5dcp
