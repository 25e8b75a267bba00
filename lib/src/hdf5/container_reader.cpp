#include "hdf5/container_reader.hpp"

#include <hdf5.h>

#include <fcntl.h>
#include <sys/uio.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "base/checksum.hpp"
#include "base/key_escape.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/version.hpp"
#include "hdf5/attributes.hpp"
#include "hdf5/container_layout.hpp"
#include "hdf5/dataspace.hpp"
#include "hdf5/hdf5_error.hpp"
#include "hdf5/hdf5_file.hpp"
#include "hdf5/pack_index.hpp"
#include "hdf5/types.hpp"
#include "hdf5/value_datasets.hpp"
#include "plan/checksum_layout.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {
namespace {

// What the datasets of a file may claim in all: the file's own size. Every
// tensor and value is stored in the file once (h5dcp writes contiguous
// datasets, allocated in full), so a file whose datasets claim more bytes
// than it has is damaged or crafted, and nothing is allocated for it.
class ByteBudget {
 public:
  ByteBudget(std::int64_t file_bytes, const std::string& path) : file_bytes_(file_bytes), path_(path) {}

  std::int64_t left() const { return file_bytes_ - claimed_; }

  void claim(std::int64_t bytes, const std::string& where) {
    if (bytes <= left()) {
      claimed_ += bytes;
      return;
    }
    throw FormatError(
        "h5dcp: " + where + " holds " + std::to_string(bytes) + " bytes, but '" + path_ + "' has " +
        std::to_string(file_bytes_) + " bytes in all" +
        (claimed_ > 0 ? " (" + std::to_string(claimed_) + " of them taken by the datasets before it)" : "") +
        ": the checkpoint is damaged");
  }

 private:
  std::int64_t file_bytes_;
  std::int64_t claimed_ = 0;
  const std::string& path_;
};

Shape shape_of(hid_t dataset, const std::string& where) {
  Handle space(check_id(H5Dget_space(dataset), "H5Dget_space"), H5Sclose);
  const int ndim = H5Sget_simple_extent_ndims(space.get());
  if (ndim < 0) throw_hdf5_error("H5Sget_simple_extent_ndims");
  std::vector<hsize_t> dims(static_cast<std::size_t>(ndim));
  if (ndim > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
    throw_hdf5_error("H5Sget_simple_extent_dims");
  Shape shape;
  for (const auto d : dims) {
    if (d > static_cast<hsize_t>(std::numeric_limits<std::int64_t>::max()))
      throw FormatError("h5dcp: " + where + " has a dimension of " + std::to_string(d) + " elements, beyond int64");
    shape.push_back(static_cast<std::int64_t>(d));
  }
  return shape;
}

// The tensor's bytes, checked against overflow and against what the file
// still has room for, before anything is allocated for it.
void claim_tensor_bytes(hid_t dataset, const TensorStorageMetadata& t, ByteBudget& budget, const std::string& where) {
  const auto bytes = checked_bytes(t.size, static_cast<std::int64_t>(dtype_size(t.properties.dtype)));
  if (!bytes)
    throw FormatError("h5dcp: " + where + " has the shape " + describe_shape(t.size) + " of " +
                      std::string(dtype_name(t.properties.dtype)) +
                      ", more bytes than 64 bits count: the checkpoint is damaged");
  budget.claim(*bytes, where);
  check_fully_stored(dataset, *bytes, where);
}

TensorStorageMetadata read_tensor_metadata(hid_t dataset, const std::string& fqn, const std::string& where,
                                           ByteBudget& budget, bool require_exact_tiling) {
  TensorStorageMetadata t;
  const auto dtype_text = read_string_attribute(dataset, layout::kDType, where);
  const auto dtype = dtype_from_name(dtype_text);
  if (!dtype) throw FormatError("h5dcp: " + where + " has an unknown dtype '" + dtype_text + "'");
  t.properties.dtype = *dtype;
  Handle stored(check_id(H5Dget_type(dataset), "H5Dget_type"), H5Tclose);
  const auto expected = hdf5_type(*dtype);
  if (H5Tequal(stored.get(), expected.get()) <= 0)
    throw FormatError("h5dcp: " + where + " is marked " + dtype_text + " but its HDF5 type is different");
  t.size = shape_of(dataset, where);
  claim_tensor_bytes(dataset, t, budget, where);
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
  const auto dims = static_cast<std::ptrdiff_t>(ndim);
  for (std::ptrdiff_t i = 0; i < static_cast<std::ptrdiff_t>(offsets.size()); i += dims) {
    ChunkStorageMetadata c{{offsets.begin() + i, offsets.begin() + i + dims},
                           {sizes.begin() + i, sizes.begin() + i + dims}};
    for (std::size_t d = 0; d < ndim; ++d)
      if (c.offsets[d] < 0 || c.sizes[d] < 0 || c.offsets[d] > t.size[d] || c.sizes[d] > t.size[d] - c.offsets[d])
        throw FormatError("h5dcp: " + where + " lists a chunk " + describe_box(c) + " outside its shape " +
                          describe_shape(t.size));
    t.chunks.push_back(std::move(c));
  }
  // The chunks say which blocks were written and checksummed: a load that
  // trusts overlapping chunks leaves the elements between them unread.
  if (require_exact_tiling)
    if (const auto problem = tiling_problem(fqn, t.size, t.chunks))
      throw FormatError("h5dcp: " + where + ": " + *problem + ": the checkpoint's chunk attributes are damaged");
  return t;
}

// The stored checksums of a tensor, checked for consistency with its chunks.
// The slabs are counted, not listed: a damaged file may claim billions.
TensorChecksums read_tensor_checksums(hid_t dataset, const TensorStorageMetadata& tensor, const std::string& where) {
  TensorChecksums sums;
  sums.rows = read_int64_attribute(dataset, layout::kChecksumRows, where);
  sums.digests = read_uint64_attribute(dataset, layout::kChecksums, where);
  if (sums.rows.size() != tensor.chunks.size())
    throw FormatError("h5dcp: " + where + " has checksum rows for " + std::to_string(sums.rows.size()) +
                      " chunks but " + std::to_string(tensor.chunks.size()) + " chunks");
  std::int64_t slabs = 0;
  for (std::size_t c = 0; c < tensor.chunks.size(); ++c) {
    if (volume(tensor.chunks[c].sizes) == 0) continue;
    if (sums.rows[c] <= 0) throw FormatError("h5dcp: " + where + " has a malformed checksum layout");
    if (__builtin_add_overflow(slabs, checksum_slab_count(tensor.chunks[c], sums.rows[c]), &slabs))
      throw FormatError("h5dcp: " + where + " has chunks of more checksum slabs than 64 bits count");
  }
  if (slabs != static_cast<std::int64_t>(sums.digests.size()))
    throw FormatError("h5dcp: " + where + " has " + std::to_string(sums.digests.size()) + " checksums for " +
                      std::to_string(slabs) + " slabs: the checkpoint is damaged");
  return sums;
}

// Walks the groups recursively, filling the index. h5dcp writes a tree of
// hard links, each object once: a soft or external link, an object reached
// twice (a cycle, or a group shared by two parents: 2^n paths through n such
// levels) or nesting beyond kMaxContainerDepth is refused before it is
// followed.
class IndexWalk {
 public:
  /// packs_known: the file's format has packs (1.2 and later), whose group
  /// at the root is read by read_pack_index, not walked.
  IndexWalk(CheckpointIndex& index, const std::string& path, ByteBudget& budget, bool require_exact_tiling,
            bool packs_known)
      : index_(index),
        path_(path),
        budget_(budget),
        require_exact_tiling_(require_exact_tiling),
        packs_known_(packs_known) {}

  void walk_root(hid_t root) {
    H5O_info_t info{};
    check_status(H5Oget_info2(root, &info, H5O_INFO_BASIC), "inspecting the root of '" + path_ + "'");
    remember(info, "/");
    walk(root, "", 0);
  }

 private:
  struct Visit {
    IndexWalk* self;
    std::string prefix;
    std::size_t depth;
    std::exception_ptr failure;
  };

  void walk(hid_t group, const std::string& prefix, std::size_t depth) {
    Visit visit{this, prefix, depth, nullptr};
    const herr_t status = H5Literate(group, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, visit_link, &visit);
    if (visit.failure) std::rethrow_exception(visit.failure);
    check_status(status, "listing '" + (prefix.empty() ? std::string("/") : prefix) + "' in '" + path_ + "'");
  }

  static herr_t visit_link(hid_t group, const char* name, const H5L_info_t* link, void* data) {
    auto* visit = static_cast<Visit*>(data);
    try {
      if (visit->prefix.empty() && visit->self->packs_known_ && std::string_view(name) == layout::kPacks) return 0;
      const auto fqn = visit->prefix.empty() ? std::string(name) : visit->prefix + "/" + name;
      if (link->type != H5L_TYPE_HARD)
        throw FormatError("h5dcp: '" + fqn + "' in '" + visit->self->path_ + "' is " +
                          (link->type == H5L_TYPE_SOFT ? "a soft" : "an external") +
                          " link: h5dcp checkpoints hold only hard links (a link may lead back into its own group "
                          "or out of the file)");
      visit->self->visit(group, fqn, name, visit->depth);
      return 0;
    } catch (...) {
      visit->failure = std::current_exception();
      return -1;
    }
  }

  // Records an object by its address; throws when the walk met it before.
  void remember(const H5O_info_t& info, const std::string& fqn) {
    const auto [it, fresh] = seen_.emplace(std::make_pair(info.fileno, info.addr), fqn);
    if (!fresh)
      throw FormatError("h5dcp: '" + fqn + "' in '" + path_ + "' is the object already read as '" + it->second +
                        "': a group or dataset linked twice (a cycle, or shared), which h5dcp never writes");
  }

  void visit(hid_t parent, const std::string& fqn, const char* name, std::size_t depth) {
    const std::string where = "'" + fqn + "' in '" + path_ + "'";
    H5O_info_t info{};
    check_status(H5Oget_info_by_name2(parent, name, &info, H5O_INFO_BASIC, H5P_DEFAULT), "inspecting " + where);
    remember(info, fqn);
    Handle object(check_id(H5Oopen(parent, name, H5P_DEFAULT), "opening " + where), H5Oclose);
    const auto key = read_string_attribute(object.get(), layout::kKey, where);
    if (escape_link_name(key) != name)
      throw FormatError("h5dcp: " + where + " is marked as key '" + key + "', which is stored under another name");
    if (info.type == H5O_TYPE_GROUP) {
      const auto kind = read_string_attribute(object.get(), layout::kContainer, where);
      if (kind != layout::kDict && kind != layout::kList)
        throw FormatError("h5dcp: " + where + " has an unknown container kind '" + kind + "'");
      if (depth + 1 >= kMaxContainerDepth)
        throw FormatError("h5dcp: " + where + " is nested " + std::to_string(depth + 1) +
                          " containers deep, deeper than the " + std::to_string(kMaxContainerDepth) +
                          " h5dcp reads: the checkpoint is damaged");
      index_.metadata.containers.emplace(fqn, kind == layout::kDict ? ContainerKind::Dict : ContainerKind::List);
      walk(object.get(), fqn, depth + 1);
      return;
    }
    if (info.type != H5O_TYPE_DATASET) throw FormatError("h5dcp: " + where + " is neither a group nor a dataset");
    require_data_in_file(object.get(), where);
    const auto kind = read_string_attribute(object.get(), layout::kKind, where);
    if (kind == layout::kTensor) {
      auto tensor = read_tensor_metadata(object.get(), fqn, where, budget_, require_exact_tiling_);
      if (has_attribute(object.get(), layout::kChecksums))
        index_.checksums.emplace(fqn, read_tensor_checksums(object.get(), tensor, where));
      index_.metadata.state_dict_metadata.emplace(fqn, std::move(tensor));
      return;
    }
    auto payload = read_value(object.get(), kind, fqn, budget_.left());
    budget_.claim(static_cast<std::int64_t>(payload.size()), where);
    if (has_attribute(object.get(), layout::kChecksums)) {
      const auto stored = read_uint64_attribute(object.get(), layout::kChecksums, where);
      if (stored.size() != 1 || stored[0] != checksum(payload.data(), payload.size()))
        throw FormatError("h5dcp: checksum mismatch in the value " + where + ": the checkpoint is damaged");
    }
    index_.metadata.state_dict_metadata.emplace(fqn,
                                                BytesStorageMetadata{kind, static_cast<std::int64_t>(payload.size())});
    index_.values.emplace(fqn, std::move(payload));
  }

  CheckpointIndex& index_;
  const std::string& path_;
  ByteBudget& budget_;
  bool require_exact_tiling_;
  bool packs_known_;
  std::map<std::pair<unsigned long, haddr_t>, std::string> seen_;  ///< object address -> the fqn it was read as
};

// Whether `fqn` is a path h5dcp could have written: escaped components
// joined by '/', none empty.
bool well_formed_fqn(const std::string& fqn) {
  std::size_t start = 0;
  for (;;) {
    const auto slash = fqn.find('/', start);
    const auto component = fqn.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    try {
      if (component.empty() || escape_link_name(unescape_link_name(component)) != component) return false;
    } catch (const Error&) {
      return false;
    }
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

// The packed tensors (format 1.2) into the index: each where the tree has
// room for it (its parent a container, its fqn no other object's).
void add_packed_tensors(CheckpointIndex& index, hid_t root, const std::string& path, ByteBudget& budget) {
  auto& md = index.metadata;
  for (auto& row : read_pack_index(root, path, budget.left())) {
    const std::string where = "the packed tensor '" + row.fqn + "' in '" + path + "'";
    if (!well_formed_fqn(row.fqn)) throw FormatError("h5dcp: " + where + " has a malformed name");
    const auto slash = row.fqn.rfind('/');
    if (slash != std::string::npos && md.containers.count(row.fqn.substr(0, slash)) == 0)
      throw FormatError("h5dcp: " + where + " lies in no container of the checkpoint");
    if (md.state_dict_metadata.count(row.fqn) != 0 || md.containers.count(row.fqn) != 0)
      throw FormatError("h5dcp: " + where + " is also an object of the tree: the checkpoint is damaged");
    budget.claim(row.count * static_cast<std::int64_t>(dtype_size(row.dtype)), where);
    if (row.count > 0) index.checksums.emplace(row.fqn, TensorChecksums{{row.checksum_rows}, {row.checksum}});
    ChunkStorageMetadata whole{Shape(row.shape.size(), 0), row.shape};
    md.state_dict_metadata.emplace(row.fqn, TensorStorageMetadata{{row.dtype}, row.shape, {std::move(whole)}});
  }
}

}  // namespace

CheckpointIndex read_container_index(const std::string& path, bool require_exact_tiling) {
  auto file = open_file_read_only(path, MPI_COMM_NULL);
  auto index = read_container_index(file.get(), path, require_exact_tiling);
  file.close("'" + path + "'");
  return index;
}

CheckpointIndex read_container_index(Hid root, const std::string& path, bool require_exact_tiling) {
  const std::string where = "the root of '" + path + "'";
  if (!has_attribute(root, layout::kFormatVersion))
    throw FormatError("h5dcp: '" + path + "' is an HDF5 file but not an h5dcp checkpoint (no " +
                      layout::kFormatVersion + " attribute)");
  CheckpointIndex index;
  auto& md = index.metadata;
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
  hsize_t file_bytes = 0;
  check_status(H5Fget_filesize(root, &file_bytes), "measuring '" + path + "'");
  ByteBudget budget(static_cast<std::int64_t>(std::min<hsize_t>(file_bytes, std::numeric_limits<std::int64_t>::max())),
                    path);
  const bool packs_known =
      md.format_version_major > 1 || (md.format_version_major == 1 && md.format_version_minor >= 2);
  IndexWalk(index, path, budget, require_exact_tiling, packs_known).walk_root(root);
  if (packs_known) add_packed_tensors(index, root, path, budget);
  return index;
}

ContainerReader::ContainerReader(const std::string& path, MPI_Comm comm)
    : path_(path),
      file_(open_file_read_only(path, comm)),
      dxpl_(transfer_properties(comm, /*collective=*/false)),
      read_ahead_(path) {
  hsize_t file_bytes = 0;
  check_status(H5Fget_filesize(file_.get(), &file_bytes), "measuring '" + path + "'");
  auto rows = read_pack_index(
      file_.get(), path,
      static_cast<std::int64_t>(std::min<hsize_t>(file_bytes, std::numeric_limits<std::int64_t>::max())));
  packed_.reserve(rows.size());
  for (auto& row : rows) packed_.emplace(row.fqn, std::move(row));
}

hid_t ContainerReader::pack(DType dtype) {
  auto it = packs_.find(dtype);
  if (it == packs_.end()) {
    const auto name = std::string(layout::kPacks) + "/" + std::string(dtype_name(dtype));
    Handle d(check_id(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), "opening the pack of " + name), H5Dclose);
    it = packs_.emplace(dtype, std::move(d)).first;
  }
  return it->second.get();
}

std::uint64_t ContainerReader::pack_start(DType dtype) {
  auto it = pack_starts_.find(dtype);
  if (it == pack_starts_.end()) it = pack_starts_.emplace(dtype, H5Dget_offset(pack(dtype))).first;
  return it->second;
}

const PackIndexRow* ContainerReader::packed_row(const std::string& fqn) const {
  const auto it = packed_.find(fqn);
  return it == packed_.end() ? nullptr : &it->second;
}

namespace {

// The elements of the pack a read of `box` of the packed tensor `row` takes:
// the block's own range when it is one range of the tensor, else the whole
// tensor (the block's rows are then copied out of it). `box` lies within it.
ElementRange pack_range_of(const PackIndexRow& row, const ChunkStorageMetadata& box) {
  if (!is_contiguous_in(box, row.shape)) return {row.offset, row.count};
  return {row.offset + linear_offset(box.offsets, contiguous_strides(row.shape)), volume(box.sizes)};
}

}  // namespace

void ContainerReader::read_pack_elements(DType dtype, ElementRange range, void* out, const std::string& fqn) {
  const hid_t d = pack(dtype);
  Handle file_space(check_id(H5Dget_space(d), "H5Dget_space"), H5Sclose);
  select_block(file_space.get(), {{range.first}, {range.count}}, fqn);
  const auto mem_space = dataspace_of({range.count});
  const auto type = hdf5_type(dtype);
  check_status(H5Dread(d, type.get(), mem_space.get(), file_space.get(), dxpl_.get(), out),
               "reading the packed tensor '" + fqn + "' from '" + path_ + "'");
}

// The run straight into the places of its pieces (plan/pack_runs.hpp), its
// gaps into the run buffer, by POSIX reads of the pack's bytes: a pack is a
// contiguous dataset of a little-endian type (read_pack_index checks the
// type), so its bytes in the file are its elements. False when that cannot
// be done here (no address, another byte order, no descriptor): the caller
// reads through HDF5.
bool ContainerReader::read_run_into_place(DType dtype, ElementRange run, const std::vector<ElementRange>& pieces,
                                          const std::string& fqn) {
  if constexpr (std::endian::native != std::endian::little) return false;
  const haddr_t start = pack_start(dtype);
  if (start == HADDR_UNDEF) return false;
  if (!raw_) raw_ = FileDescriptor::open_or_invalid(path_, O_RDONLY);
  if (!raw_) return false;
  const auto size = static_cast<std::int64_t>(dtype_size(dtype));
  std::int64_t gap_bytes = 0;
  for (const auto& piece : pieces)
    if (piece.into == nullptr) gap_bytes = std::max(gap_bytes, piece.count * size);
  if (gap_bytes > run_capacity_) {
    run_bytes_ = std::make_unique_for_overwrite<char[]>(static_cast<std::size_t>(gap_bytes));
    run_capacity_ = gap_bytes;
  }
  std::vector<iovec> buffers;
  buffers.reserve(pieces.size());
  for (const auto& piece : pieces)
    buffers.push_back(
        {piece.into != nullptr ? piece.into : run_bytes_.get(), static_cast<std::size_t>(piece.count * size)});
  const auto wanted = static_cast<std::size_t>(run.count * size);
  if (read_vector_at(raw_.get(), buffers, start + static_cast<std::uint64_t>(run.first * size), path_) != wanted)
    throw FormatError("h5dcp: reading the packed tensor '" + fqn + "' from '" + path_ +
                      "': the file ends inside its pack (truncated)");
  return true;
}

// From the last run read when it holds the range; else the range with the
// announced ranges next to it, as one read (plan/pack_runs.hpp): straight
// into their places when each has one, else into a buffer they are copied
// out of.
void ContainerReader::read_pack_range(DType dtype, ElementRange range, void* out, const std::string& fqn) {
  const auto size = static_cast<std::int64_t>(dtype_size(dtype));
  const bool in_run = run_.count > 0 && run_dtype_ == dtype && range.first >= run_.first && range.end() <= run_.end();
  if (in_run && !run_pieces_.empty()) {
    // Read into place already, if this is the read announced with `out`.
    const auto it = std::lower_bound(run_pieces_.begin(), run_pieces_.end(), range.first,
                                     [](const ElementRange& p, std::int64_t first) { return p.first < first; });
    if (it != run_pieces_.end() && it->first == range.first && it->count == range.count && it->into == out) return;
    read_pack_elements(dtype, range, out, fqn);
    return;
  }
  if (!in_run) {
    if (!announced_sorted_) {
      for (auto& [pack_dtype, ranges] : announced_) sort_ranges(ranges);
      announced_sorted_ = true;
    }
    const auto it = announced_.find(dtype);
    const auto run =
        it == announced_.end() ? range : pack_run(it->second, range, kPackRunGapBytes / size, kPackRunMaxBytes / size);
    run_.count = 0;  // a failed read leaves no run behind
    if (it != announced_.end()) {
      auto pieces = scatter_pieces(it->second, run, size);
      if (!pieces.empty() && pieces.front().into == out && read_run_into_place(dtype, run, pieces, fqn)) {
        run_ = run;
        run_dtype_ = dtype;
        run_pieces_ = std::move(pieces);
        return;
      }
    }
    if (run.count == range.count) {
      read_pack_elements(dtype, range, out, fqn);
      return;
    }
    if (run.count * size > run_capacity_) {
      run_bytes_ = std::make_unique_for_overwrite<char[]>(static_cast<std::size_t>(run.count * size));
      run_capacity_ = run.count * size;
    }
    read_pack_elements(dtype, run, run_bytes_.get(), fqn);
    run_ = run;
    run_dtype_ = dtype;
    run_pieces_.clear();
  }
  std::memcpy(out, run_bytes_.get() + (range.first - run_.first) * size, static_cast<std::size_t>(range.count * size));
}

// A block of a packed tensor: one range of its pack when it is one range of
// the tensor, else the whole tensor (at most kPackedTensorMaxBytes) read and
// the block's rows copied out.
void ContainerReader::read_packed(const std::string& fqn, const PackIndexRow& row, DType dtype,
                                  const ChunkStorageMetadata& box, void* out) {
  if (dtype != row.dtype)
    throw FormatError("h5dcp: '" + fqn + "' in '" + path_ + "' is stored as " + std::string(dtype_name(row.dtype)) +
                      ", not " + std::string(dtype_name(dtype)));
  if (!contains({Shape(row.shape.size(), 0), row.shape}, box))
    throw FormatError("h5dcp: block " + describe_box(box) + " lies outside '" + fqn + "' of shape " +
                      describe_shape(row.shape));
  if (is_contiguous_in(box, row.shape)) {
    read_pack_range(dtype, pack_range_of(row, box), out, fqn);
    return;
  }
  const auto size = static_cast<std::int64_t>(dtype_size(dtype));
  const auto strides = contiguous_strides(row.shape);
  std::vector<char> whole(static_cast<std::size_t>(row.count * size));
  read_pack_range(dtype, {row.offset, row.count}, whole.data(), fqn);
  // Row after row of the innermost dimension, an odometer over the others.
  const auto ndim = box.sizes.size();
  const auto run = static_cast<std::size_t>(box.sizes.back() * size);
  Shape at = box.offsets;
  auto* dst = static_cast<char*>(out);
  for (bool more = true; more;) {
    std::memcpy(dst, whole.data() + linear_offset(at, strides) * size, run);
    dst += run;
    more = false;
    for (std::size_t d = ndim - 1; d-- > 0;) {
      if (++at[d] < box.offsets[d] + box.sizes[d]) {
        more = true;
        break;
      }
      at[d] = box.offsets[d];
    }
  }
}

hid_t ContainerReader::dataset(const std::string& fqn) {
  if (packed_.count(fqn) != 0)
    throw FormatError("h5dcp: '" + fqn + "' in '" + path_ + "' is a packed tensor, not a dataset of its own");
  auto it = datasets_.find(fqn);
  if (it == datasets_.end()) {
    const auto name = "/" + fqn;
    Handle d(check_id(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), "opening the dataset of '" + fqn + "'"),
             H5Dclose);
    it = datasets_.emplace(fqn, std::move(d)).first;
  }
  return it->second.get();
}

void ContainerReader::will_read(const std::string& fqn, DType dtype, const ChunkStorageMetadata& box, void* into) {
  const auto elements = volume(box.sizes);
  if (elements == 0) return;
  if (const auto it = packed_.find(fqn); it != packed_.end()) {
    // The whole tensor: it is small, and read whole unless the block is one range.
    const auto size = static_cast<std::int64_t>(dtype_size(it->second.dtype));
    const haddr_t start = pack_start(it->second.dtype);
    if (start != HADDR_UNDEF)
      read_ahead_.will_read(static_cast<std::int64_t>(start) + it->second.offset * size, it->second.count * size);
    // A block outside the tensor is not announced: its read() throws.
    if (contains({Shape(it->second.shape.size(), 0), it->second.shape}, box)) {
      auto range = pack_range_of(it->second, box);
      // A block that is not one range is read whole and copied out: no place.
      if (is_contiguous_in(box, it->second.shape) && dtype == it->second.dtype) range.into = into;
      announced_[it->second.dtype].push_back(range);
      announced_sorted_ = false;
    }
    return;
  }
  const hid_t d = dataset(fqn);
  // Contiguous layout only: H5Dget_offset has no address otherwise.
  const haddr_t start = H5Dget_offset(d);
  if (start == HADDR_UNDEF) return;
  Handle space(check_id(H5Dget_space(d), "H5Dget_space"), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0 || static_cast<std::size_t>(rank) != box.sizes.size()) return;
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  // The box's first and last elements, row-major.
  std::int64_t first = 0;
  std::int64_t last = 0;
  std::int64_t stride = 1;
  for (int k = rank - 1; k >= 0; --k) {
    const auto d_k = static_cast<std::size_t>(k);
    first += box.offsets[d_k] * stride;
    last += (box.offsets[d_k] + box.sizes[d_k] - 1) * stride;
    stride *= static_cast<std::int64_t>(dims[d_k]);
  }
  const auto size = static_cast<std::int64_t>(dtype_size(dtype));
  const auto span = (last - first + 1) * size;
  // A strided block (columns, a grid) would pull in what lies between its rows.
  if (span > 2 * elements * size) return;
  read_ahead_.will_read(static_cast<std::int64_t>(start) + first * size, span);
}

void ContainerReader::read(const std::string& fqn, DType dtype, const ChunkStorageMetadata& box, void* out) {
  if (volume(box.sizes) == 0) return;
  read_ahead_.read(volume(box.sizes) * static_cast<std::int64_t>(dtype_size(dtype)));
  if (const auto it = packed_.find(fqn); it != packed_.end()) {
    read_packed(fqn, it->second, dtype, box, out);
    return;
  }
  const hid_t d = dataset(fqn);
  const auto type = hdf5_type(dtype);
  Handle file_space(check_id(H5Dget_space(d), "H5Dget_space"), H5Sclose);
  select_block(file_space.get(), box, fqn);
  const auto mem_space = dataspace_of(box.sizes);
  check_status(H5Dread(d, type.get(), mem_space.get(), file_space.get(), dxpl_.get(), out),
               "reading '" + fqn + "' block " + describe_box(box) + " from '" + path_ + "'");
}

void ContainerReader::abandon() noexcept {
  for (auto& [fqn, d] : datasets_) d.abandon();
  for (auto& [dtype, d] : packs_) d.abandon();
  file_.abandon();
}

void ContainerReader::close() {
  for (auto& [fqn, d] : datasets_) d.close("the dataset of '" + fqn + "'");
  for (auto& [dtype, d] : packs_) d.close("the pack of " + std::string(dtype_name(dtype)));
  file_.close("'" + path_ + "'");
  raw_.close_quietly();  // only read
  // Every id is closed here, so that destroying a closed reader makes no
  // HDF5 call (an owner may no longer hold the HDF5 gate then).
  dxpl_.close("the transfer property list of '" + path_ + "'");
}

}  // namespace h5dcp::detail
