#include "hdf5/attributes.hpp"

#include <hdf5.h>

#include "h5dcp/error.hpp"
#include "hdf5/hdf5_error.hpp"
#include "hdf5/types.hpp"

namespace h5dcp::detail {

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  const auto type = fixed_string_type(value.size());
  Handle space(check_id(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
  Handle attr(check_id(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                       "creating attribute " + name),
              H5Aclose);
  check_status(H5Awrite(attr.get(), type.get(), value.c_str()), "writing attribute " + name);
  attr.close("attribute " + name);
}

void write_int64_attribute(hid_t object, const std::string& name, const std::vector<std::int64_t>& values,
                           std::optional<std::size_t> rows) {
  Handle space;
  if (rows && *rows > 0) {
    const hsize_t dims[2] = {*rows, values.size() / *rows};
    space = Handle(check_id(H5Screate_simple(2, dims, nullptr), "H5Screate_simple"), H5Sclose);
  } else {
    const hsize_t dims[1] = {values.size()};
    space = Handle(check_id(H5Screate_simple(1, dims, nullptr), "H5Screate_simple"), H5Sclose);
  }
  Handle attr(check_id(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                       "creating attribute " + name),
              H5Aclose);
  check_status(H5Awrite(attr.get(), H5T_NATIVE_INT64, values.data()), "writing attribute " + name);
  attr.close("attribute " + name);
}

void write_uint64_attribute(hid_t object, const std::string& name, const std::vector<std::uint64_t>& values) {
  const hsize_t dims[1] = {values.size()};
  Handle space(check_id(H5Screate_simple(1, dims, nullptr), "H5Screate_simple"), H5Sclose);
  Handle attr(check_id(H5Acreate2(object, name.c_str(), H5T_STD_U64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                       "creating attribute " + name),
              H5Aclose);
  check_status(H5Awrite(attr.get(), H5T_NATIVE_UINT64, values.data()), "writing attribute " + name);
  attr.close("attribute " + name);
}

bool has_attribute(hid_t object, const std::string& name) { return H5Aexists(object, name.c_str()) > 0; }

namespace {

Handle open_attribute(hid_t object, const std::string& name, const std::string& where) {
  if (!has_attribute(object, name))
    throw FormatError("h5dcp: " + where + " has no attribute '" + name + "': not an h5dcp checkpoint, or damaged");
  return Handle(check_id(H5Aopen(object, name.c_str(), H5P_DEFAULT), "opening attribute " + name), H5Aclose);
}

// An attribute's data is stored in its file: one claiming more bytes than the
// file has is damaged, and is refused before `bytes` are allocated for it.
void check_attribute_size(hid_t object, const std::string& name, const std::string& where, hsize_t count,
                          std::size_t element_size) {
  Handle file(check_id(H5Iget_file_id(object), "H5Iget_file_id"), H5Fclose);
  hsize_t file_bytes = 0;
  check_status(H5Fget_filesize(file.get(), &file_bytes), "H5Fget_filesize");
  if (element_size != 0 && count > file_bytes / element_size)
    throw FormatError("h5dcp: attribute '" + name + "' of " + where + " claims " + std::to_string(count) + " x " +
                      std::to_string(element_size) + " bytes, more than the file's " + std::to_string(file_bytes) +
                      ": the checkpoint is damaged");
}

}  // namespace

namespace {

// Opens the attribute to write over, checked to hold `count` elements.
Handle open_to_overwrite(hid_t object, const std::string& name, hssize_t count) {
  auto attr = open_attribute(object, name, "the copy rewritten");
  Handle space(check_id(H5Aget_space(attr.get()), "H5Aget_space"), H5Sclose);
  if (H5Sget_simple_extent_npoints(space.get()) != count)
    throw FormatError("h5dcp: attribute '" + name + "' holds " +
                      std::to_string(H5Sget_simple_extent_npoints(space.get())) + " elements, not " +
                      std::to_string(count) + ": it cannot be written over");
  return attr;
}

}  // namespace

void overwrite_int64_attribute(hid_t object, const std::string& name, const std::vector<std::int64_t>& values) {
  auto attr = open_to_overwrite(object, name, static_cast<hssize_t>(values.size()));
  check_status(H5Awrite(attr.get(), H5T_NATIVE_INT64, values.data()), "writing attribute " + name);
  attr.close("attribute " + name);
}

void overwrite_uint64_attribute(hid_t object, const std::string& name, const std::vector<std::uint64_t>& values) {
  auto attr = open_to_overwrite(object, name, static_cast<hssize_t>(values.size()));
  check_status(H5Awrite(attr.get(), H5T_NATIVE_UINT64, values.data()), "writing attribute " + name);
  attr.close("attribute " + name);
}

std::string read_string_attribute(hid_t object, const std::string& name, const std::string& where) {
  const auto attr = open_attribute(object, name, where);
  Handle type(check_id(H5Aget_type(attr.get()), "H5Aget_type"), H5Tclose);
  Handle space(check_id(H5Aget_space(attr.get()), "H5Aget_space"), H5Sclose);
  if (H5Tget_class(type.get()) != H5T_STRING || H5Sget_simple_extent_npoints(space.get()) != 1)
    throw FormatError("h5dcp: attribute '" + name + "' of " + where + " is not a single string");
  if (H5Tis_variable_str(type.get()) > 0) {
    char* data = nullptr;
    const auto mem = variable_string_memory_type(type.get());
    check_status(H5Aread(attr.get(), mem.get(), &data), "reading attribute " + name);
    std::string value = data ? data : "";
    H5free_memory(data);
    return value;
  }
  const std::size_t size = H5Tget_size(type.get());
  check_attribute_size(object, name, where, 1, size);
  std::string value(size, '\0');
  check_status(H5Aread(attr.get(), type.get(), value.data()), "reading attribute " + name);
  value.resize(value.find('\0') == std::string::npos ? size : value.find('\0'));
  return value;
}

namespace {

// An integer attribute of any shape, flattened, converted to `T`.
template <typename T>
std::vector<T> read_integer_attribute(hid_t object, const std::string& name, const std::string& where,
                                      hid_t memory_type) {
  const auto attr = open_attribute(object, name, where);
  Handle type(check_id(H5Aget_type(attr.get()), "H5Aget_type"), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_INTEGER)
    throw FormatError("h5dcp: attribute '" + name + "' of " + where + " is not an integer");
  Handle space(check_id(H5Aget_space(attr.get()), "H5Aget_space"), H5Sclose);
  const auto n = H5Sget_simple_extent_npoints(space.get());
  if (n < 0) throw_hdf5_error("H5Sget_simple_extent_npoints");
  check_attribute_size(object, name, where, static_cast<hsize_t>(n), sizeof(T));
  std::vector<T> values(static_cast<std::size_t>(n));
  check_status(H5Aread(attr.get(), memory_type, values.data()), "reading attribute " + name);
  return values;
}

}  // namespace

std::vector<std::int64_t> read_int64_attribute(hid_t object, const std::string& name, const std::string& where) {
  return read_integer_attribute<std::int64_t>(object, name, where, H5T_NATIVE_INT64);
}

std::vector<std::uint64_t> read_uint64_attribute(hid_t object, const std::string& name, const std::string& where) {
  return read_integer_attribute<std::uint64_t>(object, name, where, H5T_NATIVE_UINT64);
}

}  // namespace h5dcp::detail
