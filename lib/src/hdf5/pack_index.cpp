#include "hdf5/pack_index.hpp"

#include <hdf5.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <tuple>

#include "base/checksum.hpp"
#include "h5dcp/error.hpp"
#include "hdf5/attributes.hpp"
#include "hdf5/container_layout.hpp"
#include "hdf5/hdf5_error.hpp"
#include "hdf5/types.hpp"
#include "hdf5/value_datasets.hpp"
#include "plan/checksum_layout.hpp"
#include "plan/tensor_packs.hpp"

namespace h5dcp::detail {
namespace {

// Room for the longest dtype name ("float8_e4m3fnuz") and more.
constexpr std::size_t kDtypeBytes = 24;
// An fqn longer than this is not one h5dcp wrote (a key is a link name).
constexpr std::size_t kMaxFqnBytes = 1 << 20;

// Where each column of a row lies, packed one after another.
struct Columns {
  std::size_t fqn = 0, dtype = 0, ndim = 0, shape = 0, offset = 0, count = 0, checksum_rows = 0, checksum = 0;
  std::size_t size = 0;
};

// A soft or external link could lead out of the file or back into its group.
void require_hard_link(Hid group, const char* name, const std::string& where) {
  H5L_info_t link{};
  check_status(H5Lget_info(group, name, &link, H5P_DEFAULT), "inspecting " + where);
  if (link.type != H5L_TYPE_HARD) throw FormatError("h5dcp: " + where + " is not a hard link");
}

template <typename Where>
DType row_dtype(const std::string& name, const Where& row_where) {
  const auto dtype = dtype_from_name(name);
  if (!dtype) throw FormatError("h5dcp: " + row_where() + " has an unknown dtype '" + name + "'");
  return *dtype;
}

Columns columns_for(std::size_t fqn_bytes) {
  Columns c;
  std::size_t at = 0;
  auto next = [&](std::size_t bytes) {
    const auto here = at;
    at += bytes;
    return here;
  };
  c.fqn = next(fqn_bytes);
  c.dtype = next(kDtypeBytes);
  c.ndim = next(8);
  c.shape = next(8 * kPackedTensorMaxDims);
  c.offset = next(8);
  c.count = next(8);
  c.checksum_rows = next(8);
  c.checksum = next(8);
  c.size = at;
  return c;
}

// The row type, in the file and in memory alike.
Handle row_type(std::size_t fqn_bytes) {
  const auto c = columns_for(fqn_bytes);
  Handle t(check_id(H5Tcreate(H5T_COMPOUND, c.size), "H5Tcreate"), H5Tclose);
  const hsize_t dims[1] = {kPackedTensorMaxDims};
  Handle shape(check_id(H5Tarray_create2(H5T_STD_I64LE, 1, dims), "H5Tarray_create2"), H5Tclose);
  check_status(H5Tinsert(t.get(), "fqn", c.fqn, fixed_string_type(fqn_bytes).get()), "H5Tinsert");
  const auto dtype = fixed_string_type(kDtypeBytes);
  check_status(H5Tset_cset(dtype.get(), H5T_CSET_ASCII), "H5Tset_cset");
  check_status(H5Tinsert(t.get(), "dtype", c.dtype, dtype.get()), "H5Tinsert");
  check_status(H5Tinsert(t.get(), "ndim", c.ndim, H5T_STD_I64LE), "H5Tinsert");
  check_status(H5Tinsert(t.get(), "shape", c.shape, shape.get()), "H5Tinsert");
  check_status(H5Tinsert(t.get(), "offset", c.offset, H5T_STD_I64LE), "H5Tinsert");
  check_status(H5Tinsert(t.get(), "count", c.count, H5T_STD_I64LE), "H5Tinsert");
  check_status(H5Tinsert(t.get(), "checksum_rows", c.checksum_rows, H5T_STD_I64LE), "H5Tinsert");
  check_status(H5Tinsert(t.get(), "checksum", c.checksum, H5T_STD_U64LE), "H5Tinsert");
  return t;
}

template <typename T>
void put(std::vector<char>& buffer, std::size_t at, T value) {
  std::memcpy(buffer.data() + at, &value, sizeof value);
}

template <typename T>
T get(const std::vector<char>& buffer, std::size_t at) {
  T value{};
  std::memcpy(&value, buffer.data() + at, sizeof value);
  return value;
}

std::string text_at(const std::vector<char>& buffer, std::size_t at, std::size_t bytes) {
  const char* begin = buffer.data() + at;
  return std::string(begin, std::find(begin, begin + bytes, '\0'));
}

}  // namespace

Handle create_pack_index(Hid packs, std::size_t rows, std::size_t fqn_bytes, Hid lcpl, Hid dcpl) {
  const auto type = row_type(std::max<std::size_t>(fqn_bytes, 1));
  const hsize_t dims[1] = {rows};
  Handle space(check_id(H5Screate_simple(1, dims, nullptr), "H5Screate_simple"), H5Sclose);
  return Handle(check_id(H5Dcreate2(packs, layout::kPackIndex, type.get(), space.get(), lcpl, dcpl, H5P_DEFAULT),
                         "creating the index of the packed tensors"),
                H5Dclose);
}

EncodedPackIndex encode_pack_index(const std::vector<PackIndexRow>& rows) {
  EncodedPackIndex encoded;
  encoded.rows = rows.size();
  for (const auto& r : rows) encoded.fqn_bytes = std::max(encoded.fqn_bytes, r.fqn.size());
  const auto c = columns_for(encoded.fqn_bytes);
  auto& buffer = encoded.bytes;
  buffer.assign(rows.size() * c.size, '\0');
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const auto base = i * c.size;
    std::memcpy(buffer.data() + base + c.fqn, r.fqn.data(), r.fqn.size());
    const auto name = dtype_name(r.dtype);
    std::memcpy(buffer.data() + base + c.dtype, name.data(), std::min(name.size(), kDtypeBytes));
    put<std::int64_t>(buffer, base + c.ndim, static_cast<std::int64_t>(r.shape.size()));
    for (std::size_t d = 0; d < r.shape.size(); ++d) put<std::int64_t>(buffer, base + c.shape + 8 * d, r.shape[d]);
    put<std::int64_t>(buffer, base + c.offset, r.offset);
    put<std::int64_t>(buffer, base + c.count, r.count);
    put<std::int64_t>(buffer, base + c.checksum_rows, r.checksum_rows);
    put<std::uint64_t>(buffer, base + c.checksum, r.checksum);
  }
  return encoded;
}

void write_pack_index(Hid index, const EncodedPackIndex& encoded, Hid dxpl) {
  if (encoded.rows == 0) return;
  const auto type = row_type(encoded.fqn_bytes);
  check_status(H5Dwrite(index, type.get(), H5S_ALL, H5S_ALL, dxpl, encoded.bytes.data()),
               "writing the index of the packed tensors");
}

std::vector<PackIndexRow> read_pack_index(Hid root, const std::string& path, std::int64_t max_bytes) {
  const std::string where = "the packed tensors' index of '" + path + "'";
  if (H5Lexists(root, layout::kPacks, H5P_DEFAULT) <= 0) return {};
  require_hard_link(root, layout::kPacks, "'" + std::string(layout::kPacks) + "' in '" + path + "'");
  Handle packs(check_id(H5Gopen2(root, layout::kPacks, H5P_DEFAULT), "opening the packs of '" + path + "'"), H5Gclose);
  if (H5Lexists(packs.get(), layout::kPackIndex, H5P_DEFAULT) <= 0)
    throw FormatError("h5dcp: '" + path + "' has packs without an index: the checkpoint is damaged");
  require_hard_link(packs.get(), layout::kPackIndex, where);
  Handle index(check_id(H5Dopen2(packs.get(), layout::kPackIndex, H5P_DEFAULT), "opening " + where), H5Dclose);
  require_data_in_file(index.get(), where);

  // The file's row type: a compound with every column, its fqn a string.
  Handle stored(check_id(H5Dget_type(index.get()), "H5Dget_type"), H5Tclose);
  if (H5Tget_class(stored.get()) != H5T_COMPOUND) throw FormatError("h5dcp: " + where + " is not a table");
  for (const char* column : {"fqn", "dtype", "ndim", "shape", "offset", "count", "checksum_rows", "checksum"})
    if (H5Tget_member_index(stored.get(), column) < 0)
      throw FormatError("h5dcp: " + where + " has no column '" + column + "'");
  Handle fqn_type(
      check_id(H5Tget_member_type(stored.get(), static_cast<unsigned>(H5Tget_member_index(stored.get(), "fqn"))),
               "H5Tget_member_type"),
      H5Tclose);
  const std::size_t fqn_bytes = H5Tget_size(fqn_type.get());
  // UTF-8, as written: HDF5 converts no string between character sets.
  if (H5Tget_class(fqn_type.get()) != H5T_STRING || H5Tis_variable_str(fqn_type.get()) > 0 || fqn_bytes == 0 ||
      fqn_bytes > kMaxFqnBytes || H5Tget_cset(fqn_type.get()) != H5T_CSET_UTF8)
    throw FormatError("h5dcp: " + where + " has an fqn column that is not a fixed-length string h5dcp writes");
  Handle space(check_id(H5Dget_space(index.get()), "H5Dget_space"), H5Sclose);
  hsize_t rows = 0;
  if (H5Sget_simple_extent_ndims(space.get()) != 1 || H5Sget_simple_extent_dims(space.get(), &rows, nullptr) < 0)
    throw FormatError("h5dcp: " + where + " is not a 1-d table");
  const auto c = columns_for(fqn_bytes);
  if (rows > static_cast<hsize_t>(max_bytes) / c.size)
    throw FormatError("h5dcp: " + where + " claims " + std::to_string(rows) + " rows, more than '" + path +
                      "' has bytes for: the checkpoint is damaged");
  check_fully_stored(index.get(), static_cast<std::int64_t>(rows * H5Tget_size(stored.get())), where);
  std::vector<char> buffer(rows * c.size);
  const auto type = row_type(fqn_bytes);
  if (rows > 0)
    check_status(H5Dread(index.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()), "reading " + where);
  const auto stored_checksum = read_uint64_attribute(index.get(), layout::kChecksums, where);
  if (stored_checksum.size() != 1 || stored_checksum[0] != checksum(buffer.data(), buffer.size()))
    throw FormatError("h5dcp: checksum mismatch in " + where + ": the checkpoint is damaged");

  // Each pack: opened once, its type and extent checked.
  std::map<DType, std::int64_t> pack_elements;
  auto elements_of = [&](DType dtype) {
    if (auto it = pack_elements.find(dtype); it != pack_elements.end()) return it->second;
    const std::string name(dtype_name(dtype));
    const std::string pack_where = "the pack '" + std::string(layout::kPacks) + "/" + name + "' of '" + path + "'";
    if (H5Lexists(packs.get(), name.c_str(), H5P_DEFAULT) <= 0)
      throw FormatError("h5dcp: " + where + " names the pack of " + name + ", which is missing");
    require_hard_link(packs.get(), name.c_str(), pack_where);
    Handle pack(check_id(H5Dopen2(packs.get(), name.c_str(), H5P_DEFAULT), "opening " + pack_where), H5Dclose);
    require_data_in_file(pack.get(), pack_where);
    Handle pack_type(check_id(H5Dget_type(pack.get()), "H5Dget_type"), H5Tclose);
    if (H5Tequal(pack_type.get(), hdf5_type(dtype).get()) <= 0)
      throw FormatError("h5dcp: " + pack_where + " is not of the HDF5 type of " + name);
    Handle pack_space(check_id(H5Dget_space(pack.get()), "H5Dget_space"), H5Sclose);
    hsize_t extent = 0;
    if (H5Sget_simple_extent_ndims(pack_space.get()) != 1 ||
        H5Sget_simple_extent_dims(pack_space.get(), &extent, nullptr) < 0)
      throw FormatError("h5dcp: " + pack_where + " is not 1-d");
    const auto bytes = checked_bytes({static_cast<std::int64_t>(extent)}, static_cast<std::int64_t>(dtype_size(dtype)));
    if (!bytes || *bytes > max_bytes)
      throw FormatError("h5dcp: " + pack_where + " claims more bytes than '" + path +
                        "' has: the checkpoint is damaged");
    check_fully_stored(pack.get(), *bytes, pack_where);
    return pack_elements.emplace(dtype, static_cast<std::int64_t>(extent)).first->second;
  };

  std::vector<PackIndexRow> out;
  out.reserve(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    const auto base = i * c.size;
    PackIndexRow r;
    r.fqn = text_at(buffer, base + c.fqn, fqn_bytes);
    // Named only in an error: built for every row, it cost more than the row.
    const auto row_where = [&] { return "row " + std::to_string(i) + " ('" + r.fqn + "') of " + where; };
    const auto dtype_text = text_at(buffer, base + c.dtype, kDtypeBytes);
    r.dtype = row_dtype(dtype_text, row_where);
    const auto ndim = get<std::int64_t>(buffer, base + c.ndim);
    if (ndim < 0 || ndim > static_cast<std::int64_t>(kPackedTensorMaxDims))
      throw FormatError("h5dcp: " + row_where() + " has " + std::to_string(ndim) + " dimensions");
    for (std::int64_t d = 0; d < ndim; ++d) {
      r.shape.push_back(get<std::int64_t>(buffer, base + c.shape + 8 * static_cast<std::size_t>(d)));
      if (r.shape.back() < 0) throw FormatError("h5dcp: " + row_where() + " has a negative dimension");
    }
    r.offset = get<std::int64_t>(buffer, base + c.offset);
    r.count = get<std::int64_t>(buffer, base + c.count);
    r.checksum_rows = get<std::int64_t>(buffer, base + c.checksum_rows);
    r.checksum = get<std::uint64_t>(buffer, base + c.checksum);
    if (checked_volume(r.shape) != r.count)
      throw FormatError("h5dcp: " + row_where() + " has " + std::to_string(r.count) + " elements for the shape " +
                        describe_shape(r.shape));
    std::int64_t end = 0;
    if (r.offset < 0 || __builtin_add_overflow(r.offset, r.count, &end) || end > elements_of(r.dtype))
      throw FormatError("h5dcp: " + row_where() + " lies outside its pack: the checkpoint is damaged");
    // One checksum slab: the whole tensor (h5dcp packs only tensors far below a slab's size).
    const ChunkStorageMetadata whole{Shape(r.shape.size(), 0), r.shape};
    if (r.count > 0 && (r.checksum_rows <= 0 || checksum_slab_count(whole, r.checksum_rows) != 1))
      throw FormatError("h5dcp: " + row_where() + " has a malformed checksum layout");
    out.push_back(std::move(r));
  }
  // No fqn in two rows (the first repeat named, as the rows come).
  std::vector<std::size_t> by_fqn(out.size());
  for (std::size_t i = 0; i < by_fqn.size(); ++i) by_fqn[i] = i;
  std::sort(by_fqn.begin(), by_fqn.end(),
            [&](std::size_t a, std::size_t b) { return std::tie(out[a].fqn, a) < std::tie(out[b].fqn, b); });
  std::optional<std::size_t> repeat;
  for (std::size_t k = 1; k < by_fqn.size(); ++k)
    if (out[by_fqn[k]].fqn == out[by_fqn[k - 1]].fqn && (!repeat || by_fqn[k] < *repeat)) repeat = by_fqn[k];
  if (repeat)
    throw FormatError("h5dcp: row " + std::to_string(*repeat) + " ('" + out[*repeat].fqn + "') of " + where +
                      " repeats an fqn of the index");
  // No two tensors share an element of a pack.
  std::vector<const PackIndexRow*> by_place;
  for (const auto& r : out)
    if (r.count > 0) by_place.push_back(&r);
  std::sort(by_place.begin(), by_place.end(),
            [](const auto* a, const auto* b) { return std::tie(a->dtype, a->offset) < std::tie(b->dtype, b->offset); });
  for (std::size_t i = 1; i < by_place.size(); ++i)
    if (by_place[i]->dtype == by_place[i - 1]->dtype &&
        by_place[i]->offset < by_place[i - 1]->offset + by_place[i - 1]->count)
      throw FormatError("h5dcp: '" + by_place[i]->fqn + "' and '" + by_place[i - 1]->fqn + "' share elements in " +
                        where + ": the checkpoint is damaged");
  return out;
}

}  // namespace h5dcp::detail
