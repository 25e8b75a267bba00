#include "hdf5/value_datasets.hpp"

#include <hdf5.h>

#include <algorithm>
#include <vector>

#include "h5dcp/error.hpp"
#include "hdf5/dataspace.hpp"
#include "hdf5/hdf5_error.hpp"
#include "hdf5/types.hpp"

namespace h5dcp::detail {
namespace {

struct ValueShape {
  Handle type;
  Handle space;
};

// The memory (= file) type and dataspace of an encoding.
ValueShape value_shape(const std::string& encoding, std::size_t payload_size) {
  const auto scalar = [] { return Handle(check_id(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose); };
  if (encoding == "int") return {hdf5_type(DType::Int64), scalar()};
  if (encoding == "float") return {hdf5_type(DType::Float64), scalar()};
  if (encoding == "bool") return {hdf5_type(DType::Bool), scalar()};
  if (encoding == "str") return {fixed_string_type(payload_size), scalar()};
  if (encoding == "bytes" || encoding == "pickle")
    return {hdf5_type(DType::UInt8), dataspace_of({static_cast<std::int64_t>(payload_size)})};
  if (encoding == "none")
    return {hdf5_type(DType::UInt8), Handle(check_id(H5Screate(H5S_NULL), "H5Screate"), H5Sclose)};
  throw UsageError("h5dcp: unknown value encoding '" + encoding + "'");
}

std::size_t fixed_size(const std::string& encoding) {
  if (encoding == "int" || encoding == "float") return 8;
  if (encoding == "bool") return 1;
  return 0;
}

// Throws before `bytes` are allocated for `what` when the file cannot hold them.
void check_fits(std::int64_t bytes, std::int64_t max_bytes, const std::string& what) {
  if (bytes > max_bytes)
    throw FormatError("h5dcp: " + what + " holds " + std::to_string(bytes) + " bytes, more than the " +
                      std::to_string(std::max<std::int64_t>(max_bytes, 0)) +
                      " bytes left in the file for it: the checkpoint is damaged");
}

}  // namespace

void check_fully_stored(hid_t dataset, std::int64_t bytes, const std::string& where) {
  if (bytes == 0) return;
  Handle dcpl(check_id(H5Dget_create_plist(dataset), "H5Dget_create_plist"), H5Pclose);
  if (H5Pget_layout(dcpl.get()) != H5D_CONTIGUOUS) return;  // compact: in the header; chunked: not h5dcp's
  const hsize_t stored = H5Dget_storage_size(dataset);
  if (stored < static_cast<hsize_t>(bytes))
    throw FormatError("h5dcp: " + where + " stores " + std::to_string(stored) + " of its " + std::to_string(bytes) +
                      " bytes: its data was never written, the checkpoint is damaged");
}

void require_data_in_file(hid_t dataset, const std::string& where) {
  Handle dcpl(check_id(H5Dget_create_plist(dataset), "H5Dget_create_plist"), H5Pclose);
  const auto layout = H5Pget_layout(dcpl.get());
  const auto external = H5Pget_external_count(dcpl.get());
  if (layout < 0 || external < 0) throw FormatError("h5dcp: the storage layout of " + where + " cannot be read");
  if (layout == H5D_VIRTUAL)
    throw FormatError("h5dcp: " + where +
                      " is a virtual dataset (its data is mapped from other datasets, possibly in other files): "
                      "h5dcp writes every dataset's data into the checkpoint itself and reads no other file");
  if (external != 0)
    throw FormatError("h5dcp: " + where + " keeps its data in external files (HDF5 external storage, " +
                      std::to_string(external) + (external == 1 ? " file" : " files") +
                      "): h5dcp writes every dataset's data into the checkpoint itself and reads no other file");
}

Handle create_value_dataset(hid_t parent, const std::string& name, hid_t lcpl, const std::string& encoding,
                            std::size_t payload_size) {
  const auto shape = value_shape(encoding, payload_size);
  return Handle(
      check_id(H5Dcreate2(parent, name.c_str(), shape.type.get(), shape.space.get(), lcpl, H5P_DEFAULT, H5P_DEFAULT),
               "creating the dataset of value '" + name + "'"),
      H5Dclose);
}

void write_value(hid_t dataset, const std::string& encoding, const std::string& payload, hid_t dxpl,
                 const std::string& fqn) {
  if (encoding == "none" || ((encoding == "bytes" || encoding == "pickle") && payload.empty())) return;
  const auto shape = value_shape(encoding, payload.size());
  const std::string what = "writing value '" + fqn + "'";
  if (encoding == "str") {
    const std::string padded = payload.empty() ? std::string(1, '\0') : payload;
    check_status(H5Dwrite(dataset, shape.type.get(), H5S_ALL, H5S_ALL, dxpl, padded.data()), what);
    return;
  }
  const auto size = fixed_size(encoding);
  if (size != 0 && payload.size() != size) throw UsageError("h5dcp: value '" + fqn + "' has a malformed payload");
  check_status(H5Dwrite(dataset, shape.type.get(), H5S_ALL, H5S_ALL, dxpl, payload.data()), what);
}

std::string read_value(hid_t dataset, const std::string& encoding, const std::string& fqn, std::int64_t max_bytes) {
  const std::string what = "value '" + fqn + "'";
  Handle space(check_id(H5Dget_space(dataset), "H5Dget_space"), H5Sclose);
  Handle stored(check_id(H5Dget_type(dataset), "H5Dget_type"), H5Tclose);
  const auto space_class = H5Sget_simple_extent_type(space.get());
  if (encoding == "none") {
    if (space_class != H5S_NULL) throw FormatError("h5dcp: " + what + " is marked none but holds data");
    return {};
  }
  if (encoding == "str") {
    if (H5Tget_class(stored.get()) != H5T_STRING || space_class != H5S_SCALAR)
      throw FormatError("h5dcp: " + what + " is marked str but is not a scalar string");
    if (H5Tis_variable_str(stored.get()) > 0) {  // as other writers may store it
      const auto mem = variable_string_memory_type(stored.get());
      char* text = nullptr;
      check_status(H5Dread(dataset, mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &text), "reading " + what);
      std::string value = text ? text : "";
      H5free_memory(text);
      return value;
    }
    const auto size = static_cast<std::int64_t>(H5Tget_size(stored.get()));
    check_fits(size, max_bytes, what);
    check_fully_stored(dataset, size, what);
    std::string value(static_cast<std::size_t>(size), '\0');
    check_status(H5Dread(dataset, stored.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, value.data()), "reading " + what);
    value.resize(std::min(value.size(), value.find('\0')));
    return value;
  }
  const auto npoints = H5Sget_simple_extent_npoints(space.get());
  const auto shape = value_shape(encoding, npoints < 0 ? 0 : static_cast<std::size_t>(npoints));
  const auto size = fixed_size(encoding);
  const bool scalar_ok = size != 0 ? space_class == H5S_SCALAR : H5Sget_simple_extent_ndims(space.get()) == 1;
  if (!scalar_ok || H5Tequal(stored.get(), shape.type.get()) <= 0)
    throw FormatError("h5dcp: " + what + " does not have the shape and type of encoding '" + encoding + "'");
  const auto bytes = static_cast<std::int64_t>(size != 0 ? size : static_cast<std::size_t>(npoints));
  check_fits(bytes, max_bytes, what);
  check_fully_stored(dataset, bytes, what);
  std::string payload(static_cast<std::size_t>(bytes), '\0');
  if (!payload.empty())
    check_status(H5Dread(dataset, shape.type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, payload.data()), "reading " + what);
  return payload;
}

}  // namespace h5dcp::detail
