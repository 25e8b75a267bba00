#pragma once
// Reading and writing the small attributes that carry h5dcp's metadata.
// Writing an attribute is collective in parallel HDF5: every rank of the file
// calls the same writes with the same values.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hdf5/handle.hpp"

namespace h5dcp::detail {

/// A scalar fixed-length UTF-8 string attribute, NUL-padded (types.hpp says
/// why never variable length).
void write_string_attribute(Hid object, const std::string& name, const std::string& value);
/// A 1-D attribute, or 2-D of `rows` x (size / rows) when `rows` is given.
void write_int64_attribute(Hid object, const std::string& name, const std::vector<std::int64_t>& values,
                           std::optional<std::size_t> rows = std::nullopt);

/// A 1-D unsigned 64-bit attribute (checksums).
void write_uint64_attribute(Hid object, const std::string& name, const std::vector<std::uint64_t>& values);

/// Write over the existing attribute `name` of `object` (a node-local copy
/// rewritten in place, api/local_save.cpp): it keeps its type and shape, so
/// it must hold as many elements; FormatError otherwise.
void overwrite_int64_attribute(Hid object, const std::string& name, const std::vector<std::int64_t>& values);
void overwrite_uint64_attribute(Hid object, const std::string& name, const std::vector<std::uint64_t>& values);

bool has_attribute(Hid object, const std::string& name);
/// Reads a string attribute (variable- or fixed-length); throws FormatError
/// naming `where` when it is absent or not a string.
std::string read_string_attribute(Hid object, const std::string& name, const std::string& where);
/// Reads an integer attribute of any shape, flattened; throws FormatError
/// when absent or not an integer.
std::vector<std::int64_t> read_int64_attribute(Hid object, const std::string& name, const std::string& where);
/// Reads an unsigned 64-bit attribute, flattened; throws FormatError when
/// absent or not an integer.
std::vector<std::uint64_t> read_uint64_attribute(Hid object, const std::string& name, const std::string& where);

}  // namespace h5dcp::detail
