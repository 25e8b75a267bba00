#include "hdf5/container_reader.hpp"

#include <vector>

#include "h5dcp/error.hpp"
#include "h5dcp/version.hpp"
#include "hdf5/attributes.hpp"
#include "hdf5/container_layout.hpp"
#include "hdf5/dataspace.hpp"
#include "hdf5/hdf5_error.hpp"
#include "hdf5/hdf5_file.hpp"
#include "hdf5/link_name.hpp"
#include "hdf5/types.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {
namespace {

struct Walk {
  Metadata* metadata;
  std::string path;
  std::exception_ptr failure;
};

Shape shape_of(hid_t dataset) {
  Handle space(check_id(H5Dget_space(dataset), "H5Dget_space"), H5Sclose);
  const int ndim = H5Sget_simple_extent_ndims(space.get());
  if (ndim < 0) throw_hdf5_error("H5Sget_simple_extent_ndims");
  std::vector<hsize_t> dims(static_cast<std::size_t>(ndim));
  if (ndim > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
    throw_hdf5_error("H5Sget_simple_extent_dims");
  return Shape(dims.begin(), dims.end());
}

TensorStorageMetadata read_tensor_metadata(hid_t dataset, const std::string& where) {
  TensorStorageMetadata t;
  const auto dtype_text = read_string_attribute(dataset, layout::kDType, where);
  const auto dtype = dtype_from_name(dtype_text);
  if (!dtype) throw FormatError("h5dcp: " + where + " has an unknown dtype '" + dtype_text + "'");
  t.properties.dtype = *dtype;
  Handle stored(check_id(H5Dget_type(dataset), "H5Dget_type"), H5Tclose);
  const auto expected = hdf5_type(*dtype);
  if (H5Tequal(stored.get(), expected.get()) <= 0)
    throw FormatError("h5dcp: " + where + " is marked " + dtype_text + " but its HDF5 type is different");
  t.size = shape_of(dataset);
  const std::size_t ndim = t.size.size();
  if (ndim == 0) {
    t.chunks.push_back({});
    return t;
  }
  const auto offsets = read_int64_attribute(dataset, layout::kChunkOffsets, where);
  const auto sizes = read_int64_attribute(dataset, layout::kChunkSizes, where);
  if (offsets.size() != sizes.size() || offsets.size() % ndim != 0)
    throw FormatError("h5dcp: " + where + " has chunk attributes that do not match its " + std::to_string(ndim) +
                      " dimensions");
  for (std::size_t i = 0; i < offsets.size(); i += ndim) {
    ChunkStorageMetadata c{{offsets.begin() + i, offsets.begin() + i + ndim}, {sizes.begin() + i, sizes.begin() + i + ndim}};
    for (std::size_t d = 0; d < ndim; ++d)
      if (c.offsets[d] < 0 || c.sizes[d] < 0 || c.offsets[d] + c.sizes[d] > t.size[d])
        throw FormatError("h5dcp: " + where + " lists a chunk " + describe_box(c) + " outside its shape " +
                          describe_shape(t.size));
    t.chunks.push_back(std::move(c));
  }
  return t;
}

herr_t visit_link(hid_t group, const char* name, const H5L_info_t*, void* data) {
  auto* walk = static_cast<Walk*>(data);
  try {
    const std::string where = "'" + std::string(name) + "' in '" + walk->path + "'";
    H5O_info_t info{};
    check_status(H5Oget_info_by_name(group, name, &info, H5P_DEFAULT), "inspecting " + where);
    if (info.type != H5O_TYPE_DATASET)
      throw FormatError("h5dcp: " + where + " is not a dataset (format v1 stores tensors at the root)");
    Handle dataset(check_id(H5Dopen2(group, name, H5P_DEFAULT), "opening " + where), H5Dclose);
    auto key = read_string_attribute(dataset.get(), layout::kKey, where);
    if (escape_link_name(key) != name)
      throw FormatError("h5dcp: " + where + " is marked as key '" + key + "', which is stored under another name");
    walk->metadata->state_dict_metadata.emplace(std::move(key), read_tensor_metadata(dataset.get(), where));
    return 0;
  } catch (...) {
    walk->failure = std::current_exception();
    return -1;
  }
}

}  // namespace

Metadata read_container_metadata(const std::string& path) {
  auto file = open_file_read_only(path, MPI_COMM_NULL);
  const hid_t root = file.get();
  const std::string where = "the root of '" + path + "'";
  if (!has_attribute(root, layout::kFormatVersion))
    throw FormatError("h5dcp: '" + path + "' is an HDF5 file but not an h5dcp checkpoint (no " +
                      layout::kFormatVersion + " attribute)");
  Metadata md;
  const auto version = read_int64_attribute(root, layout::kFormatVersion, where);
  if (version.size() != 2) throw FormatError("h5dcp: " + where + " has a malformed format version");
  md.format_version_major = static_cast<int>(version[0]);
  md.format_version_minor = static_cast<int>(version[1]);
  if (md.format_version_major > kFormatVersionMajor)
    throw FormatError("h5dcp: '" + path + "' has container format " + std::to_string(version[0]) + "." +
                      std::to_string(version[1]) + ", newer than the " + std::to_string(kFormatVersionMajor) +
                      ".x this h5dcp " + kLibraryVersion + " reads; upgrade h5dcp to load it");
  md.library_version = read_string_attribute(root, layout::kLibraryVersion, where);
  const auto world = read_int64_attribute(root, layout::kWorldSize, where);
  if (world.size() != 1) throw FormatError("h5dcp: " + where + " has a malformed world size");
  md.world_size = static_cast<int>(world[0]);
  md.created = read_string_attribute(root, layout::kCreated, where);

  Walk walk{&md, path, nullptr};
  const herr_t status = H5Literate(root, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, visit_link, &walk);
  if (walk.failure) std::rethrow_exception(walk.failure);
  check_status(status, "listing '" + path + "'");
  file.close("'" + path + "'");
  return md;
}

ContainerReader::ContainerReader(const std::string& path, MPI_Comm comm)
    : path_(path),
      comm_(comm),
      file_(open_file_read_only(path, comm)),
      dxpl_(transfer_properties(comm, /*collective=*/false)) {}

hid_t ContainerReader::dataset(const std::string& fqn) {
  auto it = datasets_.find(fqn);
  if (it == datasets_.end()) {
    const auto name = escape_link_name(fqn);
    Handle d(check_id(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), "opening the dataset of '" + fqn + "'"),
             H5Dclose);
    it = datasets_.emplace(fqn, std::move(d)).first;
  }
  return it->second.get();
}

void ContainerReader::read(const std::string& fqn, DType dtype, const ChunkStorageMetadata& box, void* out) {
  if (volume(box.sizes) == 0) return;
  const hid_t d = dataset(fqn);
  const auto type = hdf5_type(dtype);
  Handle file_space(check_id(H5Dget_space(d), "H5Dget_space"), H5Sclose);
  select_block(file_space.get(), box, fqn);
  const auto mem_space = dataspace_of(box.sizes);
  check_status(H5Dread(d, type.get(), mem_space.get(), file_space.get(), dxpl_.get(), out),
               "reading '" + fqn + "' block " + describe_box(box) + " from '" + path_ + "'");
}

void ContainerReader::close() {
  for (auto& [fqn, d] : datasets_) d.close("the dataset of '" + fqn + "'");
  file_.close("'" + path_ + "'");
}

}  // namespace h5dcp::detail
