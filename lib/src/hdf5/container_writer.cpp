#include "hdf5/container_writer.hpp"

#include <fcntl.h>
#include <hdf5.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <exception>

#include "base/checksum.hpp"
#include "base/fault_injection.hpp"
#include "base/key_escape.hpp"
#include "comm/plain_calls.hpp"
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
#include "plan/chunk_geometry.hpp"
#include "storage/durable_file.hpp"

namespace h5dcp::detail {
namespace {

// The HDF5 path of an fqn: its components are escaped already. HDF5 takes
// it as a C string: a key with a NUL byte (or not UTF-8) is refused rather
// than cut short, whatever planner made the plan.
std::string hdf5_path(const std::string& fqn) {
  require_storable_key(fqn);
  return "/" + fqn;
}

// The unescaped last component: the dict key or list position.
std::string key_of(const std::string& fqn) {
  const auto slash = fqn.rfind('/');
  return unescape_link_name(slash == std::string::npos ? fqn : fqn.substr(slash + 1));
}

void write_tensor_attributes(hid_t dataset, const PlannedTensor& t) {
  write_string_attribute(dataset, layout::kKey, key_of(t.fqn));
  write_string_attribute(dataset, layout::kKind, layout::kTensor);
  write_string_attribute(dataset, layout::kDType, std::string(dtype_name(t.dtype)));
  if (t.global_shape.empty()) return;  // a 0-d tensor is one chunk: the scalar
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> sizes;
  for (const auto& c : t.chunks) {
    offsets.insert(offsets.end(), c.chunk.offsets.begin(), c.chunk.offsets.end());
    sizes.insert(sizes.end(), c.chunk.sizes.begin(), c.chunk.sizes.end());
  }
  write_int64_attribute(dataset, layout::kChunkOffsets, offsets, t.chunks.size());
  write_int64_attribute(dataset, layout::kChunkSizes, sizes, t.chunks.size());
}

}  // namespace

ContainerWriter::ContainerWriter(const std::string& path, MPI_Comm comm, const GlobalSavePlan& plan,
                                 std::int64_t pack_max_bytes)
    : path_(path),
      comm_(comm),
      plan_(plan),
      file_(create_file(path, comm)),
      writeback_(path),
      packs_(plan_tensor_packs(plan, pack_max_bytes)) {
  rank_ = detail::rank_of(comm_);  // checked: a bad communicator is an IoError here
  const hid_t root = file_.get();
  write_int64_attribute(root, layout::kFormatVersion, {kFormatVersionMajor, kFormatVersionMinor});
  write_string_attribute(root, layout::kLibraryVersion, kLibraryVersion);
  write_int64_attribute(root, layout::kWorldSize, {plan.world_size});
  write_string_attribute(root, layout::kCreated, plan.created);
  write_string_attribute(root, layout::kChecksumAlgorithm, kChecksumAlgorithm);

  Handle lcpl(check_id(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate"), H5Pclose);
  check_status(H5Pset_char_encoding(lcpl.get(), H5T_CSET_UTF8), "H5Pset_char_encoding");

  // Containers are sorted by fqn, so a parent is always created before its children.
  for (const auto& [fqn, kind] : plan.containers) {
    Handle group(check_id(H5Gcreate2(root, hdf5_path(fqn).c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
                          "creating the group of '" + fqn + "'"),
                 H5Gclose);
    write_string_attribute(group.get(), layout::kKey, key_of(fqn));
    write_string_attribute(group.get(), layout::kContainer,
                           kind == ContainerKind::Dict ? layout::kDict : layout::kList);
    group.close("the group of '" + fqn + "'");
  }

  Handle dcpl(check_id(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate"), H5Pclose);
  check_status(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), "H5Pset_layout");
  // Every element is written by some rank: fill values would only double the I/O.
  check_status(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time");
  // Space for every dataset when it is made (parallel HDF5 requires it; a
  // serial node-local copy, hdf5/local_file.hpp, leaves the datasets it
  // holds nothing of unwritten: holes, yet a dataset of its full size).
  check_status(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time");
  // No access/modification times: each attribute write would update them.
  check_status(H5Pset_obj_track_times(dcpl.get(), false), "H5Pset_obj_track_times");
  for (std::size_t ti = 0; ti < plan.tensors.size(); ++ti) {
    const auto& t = plan.tensors[ti];
    if (packs_.places[ti]) {  // in a pack: no dataset, no type of its own
      tensor_datasets_.emplace_back();
      tensor_types_.emplace_back();
      continue;
    }
    tensor_types_.push_back(hdf5_type(t.dtype));
    const auto space = dataspace_of(t.global_shape);
    Handle dataset(check_id(H5Dcreate2(root, hdf5_path(t.fqn).c_str(), tensor_types_.back().get(), space.get(),
                                       lcpl.get(), dcpl.get(), H5P_DEFAULT),
                            "creating the dataset of '" + t.fqn + "'"),
                   H5Dclose);
    write_tensor_attributes(dataset.get(), t);
    tensor_datasets_.push_back(std::move(dataset));
  }
  if (!packs_.elements.empty()) create_packs(root, lcpl.get(), dcpl.get());
  for (const auto& v : plan.values) {
    auto dataset = create_value_dataset(root, hdf5_path(v.fqn), lcpl.get(), v.encoding, v.payload.size());
    write_string_attribute(dataset.get(), layout::kKey, key_of(v.fqn));
    write_string_attribute(dataset.get(), layout::kKind, v.encoding);
    write_uint64_attribute(dataset.get(), layout::kChecksums, {checksum(v.payload.data(), v.payload.size())});
    value_datasets_.push_back(std::move(dataset));
  }
}

void ContainerWriter::create_packs(Hid root, Hid lcpl, Hid dcpl) {
  packs_group_ = Handle(
      check_id(H5Gcreate2(root, layout::kPacks, lcpl, H5P_DEFAULT, H5P_DEFAULT), "creating the packs"), H5Gclose);
  for (const auto& [dtype, elements] : packs_.elements) {
    const auto type = hdf5_type(dtype);
    const auto space = dataspace_of({elements});
    const std::string name(dtype_name(dtype));
    pack_datasets_.emplace(
        dtype,
        Handle(check_id(H5Dcreate2(packs_group_.get(), name.c_str(), type.get(), space.get(), lcpl, dcpl, H5P_DEFAULT),
                        "creating the pack of " + name),
               H5Dclose));
  }
  std::size_t rows = 0;
  std::size_t fqn_bytes = 1;
  for (std::size_t ti = 0; ti < plan_.tensors.size(); ++ti)
    if (packs_.places[ti]) {
      ++rows;
      fqn_bytes = std::max(fqn_bytes, plan_.tensors[ti].fqn.size());
    }
  pack_index_ = create_pack_index(packs_group_.get(), rows, fqn_bytes, lcpl, dcpl);
}

namespace {

// The dataset `fqn` of the file being rewritten, checked to hold `elements`
// elements of `element_size` bytes each.
Handle open_dataset_to_rewrite(hid_t root, const std::string& fqn, std::int64_t elements, std::size_t element_size) {
  Handle dataset(check_id(H5Dopen2(root, hdf5_path(fqn).c_str(), H5P_DEFAULT), "opening the dataset of '" + fqn + "'"),
                 H5Dclose);
  Handle space(check_id(H5Dget_space(dataset.get()), "H5Dget_space"), H5Sclose);
  Handle type(check_id(H5Dget_type(dataset.get()), "H5Dget_type"), H5Tclose);
  if (H5Sget_simple_extent_npoints(space.get()) != elements || H5Tget_size(type.get()) != element_size)
    throw FormatError("h5dcp: the dataset of '" + fqn + "' is not of the plan's size: the file cannot be rewritten");
  return dataset;
}

}  // namespace

ContainerWriter::ContainerWriter(const std::string& path, const GlobalSavePlan& plan, Rewrite)
    : path_(path),
      comm_(MPI_COMM_NULL),
      plan_(plan),
      file_(open_file_read_write(path)),
      rewrite_(true),
      writeback_(path),
      packs_(plan_tensor_packs(plan, -1)) {
  // The file keeps its h5dcp.created, the time the copy was first made: it
  // is written over in place, not made anew (only its data and checksums).
  const hid_t root = file_.get();
  for (const auto& t : plan.tensors) {
    tensor_datasets_.push_back(
        open_dataset_to_rewrite(root, t.fqn, volume(t.global_shape), static_cast<std::size_t>(dtype_size(t.dtype))));
    tensor_types_.push_back(hdf5_type(t.dtype));
  }
  for (const auto& v : plan.values) {
    value_datasets_.emplace_back(
        check_id(H5Dopen2(root, hdf5_path(v.fqn).c_str(), H5P_DEFAULT), "opening the dataset of '" + v.fqn + "'"),
        H5Dclose);
    overwrite_uint64_attribute(value_datasets_.back().get(), layout::kChecksums,
                               {checksum(v.payload.data(), v.payload.size())});
  }
}

namespace {

std::int64_t block_bytes(const PlannedTensor& t, const Shape& sizes) {
  return volume(sizes) * static_cast<std::int64_t>(dtype_size(t.dtype));
}

}  // namespace

// Fault injection ("save:write@<rank>!short"): the write loses the second
// half of the block, as a short write that the I/O stack failed to report
// would. The checksums, taken from the bytes in memory, must catch it.
std::shared_ptr<const void> ContainerWriter::maybe_short(std::shared_ptr<const void> data, std::int64_t bytes) const {
  if (!short_write_requested("save:write", rank_)) return data;
  auto copy = std::make_shared<std::vector<char>>(static_cast<std::size_t>(bytes), '\0');
  std::memcpy(copy->data(), data.get(), static_cast<std::size_t>(bytes / 2));
  return std::shared_ptr<const void>(copy, copy->data());
}

void ContainerWriter::write(int rank, IoMode mode, const ChunkSource& source) {
  const bool collective = comm_ != MPI_COMM_NULL && mode == IoMode::Collective;
  std::exception_ptr failure;
  write_tensors(rank, collective, source, failure);
  if (failure) std::rethrow_exception(failure);
  write_values(rank);
}

void ContainerWriter::write_values(int rank) {
  // Values are tiny and have one writer each: independent writes.
  const auto dxpl = transfer_properties(comm_, /*collective=*/false);
  for (std::size_t i = 0; i < plan_.values.size(); ++i) {
    const auto& v = plan_.values[i];
    if (v.writer == rank) write_value(value_datasets_[i].get(), v.encoding, v.payload, dxpl.get(), v.fqn);
  }
}

void ContainerWriter::write_block(std::size_t tensor_index, const ChunkStorageMetadata& box, const void* data) {
  const auto& t = plan_.tensors.at(tensor_index);
  if (volume(box.sizes) == 0) return;
  if (!independent_dxpl_.valid()) independent_dxpl_ = transfer_properties(comm_, /*collective=*/false);
  if (const auto& place = packs_.places[tensor_index]) {
    // A block of a packed tensor is one range of its pack when it is one
    // range of the tensor (the staging pieces are whole rows).
    if (!is_contiguous_in(box, t.global_shape))
      throw Error("h5dcp: block " + describe_box(box) + " of the packed tensor '" + t.fqn + "' is not one range");
    const auto first = linear_offset(box.offsets, contiguous_strides(t.global_shape));
    write_pack_range(place->dtype, place->offset + first, volume(box.sizes), data, independent_dxpl_.get());
    return;
  }
  const hid_t dataset = tensor_datasets_[tensor_index].get();
  Handle file_space(check_id(H5Dget_space(dataset), "H5Dget_space"), H5Sclose);
  select_block(file_space.get(), box, t.fqn);
  const auto mem_space = dataspace_of(box.sizes);
  const auto written = maybe_short(std::shared_ptr<const void>(data, [](const void*) {}), block_bytes(t, box.sizes));
  check_status(H5Dwrite(dataset, tensor_types_[tensor_index].get(), mem_space.get(), file_space.get(),
                        independent_dxpl_.get(), written.get()),
               "writing '" + t.fqn + "' block " + describe_box(box));
  writeback_.written(block_bytes(t, box.sizes));
}

void ContainerWriter::write_pack_range(DType dtype, std::int64_t first, std::int64_t count, const void* data,
                                       Hid dxpl) {
  if (count == 0) return;
  const hid_t pack = pack_datasets_.at(dtype).get();
  const auto bytes = count * static_cast<std::int64_t>(dtype_size(dtype));
  Handle file_space(check_id(H5Dget_space(pack), "H5Dget_space"), H5Sclose);
  select_block(file_space.get(), {{first}, {count}},
               std::string(layout::kPacks) + "/" + std::string(dtype_name(dtype)));
  const auto mem_space = dataspace_of({count});
  const auto written = maybe_short(std::shared_ptr<const void>(data, [](const void*) {}), bytes);
  const auto type = hdf5_type(dtype);
  check_status(H5Dwrite(pack, type.get(), mem_space.get(), file_space.get(), dxpl, written.get()),
               "writing elements [" + std::to_string(first) + ", " + std::to_string(first + count) +
                   ") of the pack of " + std::string(dtype_name(dtype)));
  writeback_.written(bytes);
}

// Each rank's packed tensors of a dtype lie together in its pack, one after
// another in plan order (plan_tensor_packs): they take one write however many
// they are, straight from their bytes (write_pack_in_place) or, where that
// cannot be done, gathered into one buffer first.
void ContainerWriter::write_packs(int rank, const ChunkSource& source, std::exception_ptr& failure) {
  const auto dxpl = transfer_properties(comm_, /*collective=*/false);
  for (const auto& [key, range] : packs_.ranges) {
    const auto& [dtype, writer] = key;
    if (writer != rank || range.end == range.begin || failure) continue;
    const auto size = static_cast<std::int64_t>(dtype_size(dtype));
    try {
      std::vector<std::shared_ptr<const void>> held;  // each tensor's bytes, alive until written
      std::vector<iovec> pieces;
      std::int64_t next = range.begin;
      for (std::size_t ti = 0; ti < plan_.tensors.size(); ++ti) {
        const auto& place = packs_.places[ti];
        const auto& t = plan_.tensors[ti];
        if (!place || place->dtype != dtype || place->count == 0 || t.chunks.front().writer != rank) continue;
        if (place->offset != next)
          throw Error("h5dcp: the packed tensor '" + t.fqn + "' is not where the pack's range has it");
        held.push_back(source(t, t.chunks.front()));
        pieces.push_back({const_cast<void*>(held.back().get()), static_cast<std::size_t>(place->count * size)});
        next += place->count;
      }
      if (next != range.end) throw Error("h5dcp: the pack of " + std::string(dtype_name(dtype)) + " has a hole");
      if (write_pack_in_place(dtype, range.begin, range.end - range.begin, pieces)) continue;
      std::vector<char> buffer(static_cast<std::size_t>((range.end - range.begin) * size));
      auto* out = buffer.data();
      for (const auto& piece : pieces)
        out = static_cast<char*>(std::memcpy(out, piece.iov_base, piece.iov_len)) + piece.iov_len;
      write_pack_range(dtype, range.begin, range.end - range.begin, buffer.data(), dxpl.get());
    } catch (...) {
      failure = std::current_exception();
    }
  }
}

// The pieces, `count` elements from element `first` of the pack, by POSIX writes
// at the pack's address: a pack is a contiguous dataset of a little-endian
// type, allocated when created (its address fixed) and never filled or
// cached by HDF5, so its bytes in the file are its elements. False when that
// cannot be done here (no address, another byte order, no descriptor): the
// caller writes through HDF5. The save's fsync, on every rank, covers these
// writes like HDF5's.
bool ContainerWriter::write_pack_in_place(DType dtype, std::int64_t first, std::int64_t count,
                                          std::vector<iovec>& pieces) {
  if constexpr (std::endian::native != std::endian::little) return false;
  const haddr_t start = H5Dget_offset(pack_datasets_.at(dtype).get());
  if (start == HADDR_UNDEF) return false;
  if (!raw_) raw_ = FileDescriptor::open_or_invalid(path_, O_WRONLY);
  if (!raw_) return false;
  const auto size = static_cast<std::int64_t>(dtype_size(dtype));
  const auto bytes = count * size;
  if (short_write_requested("save:write", rank_)) {
    // Fault injection: the second half of the range is lost (see maybe_short).
    auto keep = static_cast<std::size_t>(bytes / 2);
    for (auto& piece : pieces) {
      piece.iov_len = std::min(piece.iov_len, keep);
      keep -= piece.iov_len;
    }
  }
  const auto at = start + static_cast<std::uint64_t>(first * size);
  if (const int error = pwritev_fully(raw_.get(), pieces, at); error != 0)
    throw_errno("writing the pack of " + std::string(dtype_name(dtype)) + " to '" + path_ + "'", error);
  writeback_.written(bytes);
  return true;
}

void ContainerWriter::write_tensors(int rank, bool collective, const ChunkSource& source, std::exception_ptr& failure) {
  const auto collective_dxpl = transfer_properties(comm_, collective);
  const auto independent_dxpl = transfer_properties(comm_, false);
  const char dummy = 0;
  for (std::size_t ti = 0; ti < plan_.tensors.size(); ++ti) {
    const auto& t = plan_.tensors[ti];
    if (packs_.places[ti]) continue;  // written below, with its pack
    const hid_t dataset = tensor_datasets_[ti].get();
    // Collective I/O aggregates blocks that are scattered through the file
    // (column or grid shards). A tensor with one writer, or whose every
    // block is one contiguous range (row shards), has nothing to aggregate:
    // two-phase I/O would only add rounds of exchanges and synchronizing
    // calls (measured at 1 GiB, 2 ranks: independent row-block writes were
    // 0.83-0.84 s per save in three runs, collective 0.88-1.6 s).
    const bool scattered = std::any_of(t.chunks.begin(), t.chunks.end(), [&](const PlannedChunk& c) {
      return !is_contiguous_in(c.chunk, t.global_shape);
    });
    const bool tensor_collective = collective && t.chunks.size() > 1 && scattered;
    const auto& dxpl = tensor_collective ? collective_dxpl : independent_dxpl;
    // In collective mode every rank makes the same number of H5Dwrite calls
    // per dataset: as many as the busiest writer of that dataset.
    std::vector<const PlannedChunk*> mine;
    std::vector<std::size_t> per_rank(static_cast<std::size_t>(plan_.world_size), 0);
    for (const auto& c : t.chunks) {
      ++per_rank[static_cast<std::size_t>(c.writer)];
      if (c.writer == rank) mine.push_back(&c);
    }
    std::size_t calls = tensor_collective ? *std::max_element(per_rank.begin(), per_rank.end()) : mine.size();
    // A dataset without elements has no storage to write to (on any rank).
    if (volume(t.global_shape) == 0) calls = 0;

    for (std::size_t call = 0; call < calls; ++call) {
      const PlannedChunk* chunk = call < mine.size() && !failure ? mine[call] : nullptr;
      // Resolve the bytes apart from the write: a rank whose data fails must
      // still make its (then empty) collective call.
      std::shared_ptr<const void> data;
      if (chunk != nullptr && volume(chunk->chunk.sizes) > 0) {
        try {
          data = source(t, *chunk);
        } catch (...) {
          failure = std::current_exception();
        }
      }
      try {
        Handle file_space(check_id(H5Dget_space(dataset), "H5Dget_space"), H5Sclose);
        Handle mem_space;
        if (!data) {
          check_status(H5Sselect_none(file_space.get()), "H5Sselect_none");
          mem_space = Handle(check_id(H5Screate(H5S_SCALAR), "H5Screate"), H5Sclose);
          check_status(H5Sselect_none(mem_space.get()), "H5Sselect_none");
        } else {
          select_block(file_space.get(), chunk->chunk, t.fqn);
          mem_space = dataspace_of(chunk->chunk.sizes);
        }
        if (data) data = maybe_short(std::move(data), block_bytes(t, chunk->chunk.sizes));
        check_status(H5Dwrite(dataset, tensor_types_[ti].get(), mem_space.get(), file_space.get(), dxpl.get(),
                              data ? data.get() : &dummy),
                     "writing '" + t.fqn + "'" + (data ? " block " + describe_box(chunk->chunk) : std::string()));
        if (data) writeback_.written(block_bytes(t, chunk->chunk.sizes));
      } catch (...) {
        // Keep taking part in the collective writes that follow.
        if (!failure) failure = std::current_exception();
      }
    }
  }
  write_packs(rank, source, failure);
}

void ContainerWriter::write_checksums(const std::vector<TensorChecksums>& checksums) {
  std::vector<PackIndexRow> rows;
  for (std::size_t i = 0; i < plan_.tensors.size() && i < checksums.size(); ++i) {
    if (const auto& place = packs_.places[i]) {
      const auto& t = plan_.tensors[i];
      const bool stored = !checksums[i].digests.empty();
      rows.push_back(PackIndexRow{t.fqn, place->dtype, t.global_shape, place->offset, place->count,
                                  stored ? checksums[i].rows.front() : 0, stored ? checksums[i].digests.front() : 0});
      continue;
    }
    if (checksums[i].digests.empty()) continue;  // nothing stored (no elements)
    if (rewrite_) {
      overwrite_int64_attribute(tensor_datasets_[i].get(), layout::kChecksumRows, checksums[i].rows);
      overwrite_uint64_attribute(tensor_datasets_[i].get(), layout::kChecksums, checksums[i].digests);
      continue;
    }
    write_int64_attribute(tensor_datasets_[i].get(), layout::kChecksumRows, checksums[i].rows);
    write_uint64_attribute(tensor_datasets_[i].get(), layout::kChecksums, checksums[i].digests);
  }
  if (!pack_index_.valid()) return;
  // Every rank encodes the same rows: the checksum attribute is written
  // collectively, the rows once.
  const auto encoded = encode_pack_index(rows);
  write_uint64_attribute(pack_index_.get(), layout::kChecksums, {checksum(encoded.bytes.data(), encoded.bytes.size())});
  if (rank_ == 0) write_pack_index(pack_index_.get(), encoded, transfer_properties(comm_, /*collective=*/false).get());
}

std::int64_t ContainerWriter::allocated_bytes() const {
  // The end of the last dataset's storage (allocated when created).
  std::int64_t end = 0;
  auto extend = [&](const Handle& dataset) {
    const haddr_t offset = H5Dget_offset(dataset.get());
    if (offset == HADDR_UNDEF) return;  // nothing allocated (no elements)
    end = std::max(end, static_cast<std::int64_t>(offset + H5Dget_storage_size(dataset.get())));
  };
  for (const auto& d : tensor_datasets_)
    if (d.valid()) extend(d);
  for (const auto& d : value_datasets_) extend(d);
  for (const auto& [dtype, d] : pack_datasets_) extend(d);
  if (pack_index_.valid()) extend(pack_index_);
  return end;
}

void ContainerWriter::abandon() noexcept {
  for (auto& d : tensor_datasets_) d.abandon();
  for (auto& d : value_datasets_) d.abandon();
  for (auto& [dtype, d] : pack_datasets_) d.abandon();
  pack_index_.abandon();
  packs_group_.abandon();
  independent_dxpl_.abandon();
  file_.abandon();
}

void ContainerWriter::close() {
  raw_.close(path_);
  independent_dxpl_.close("a transfer property list");
  for (std::size_t i = 0; i < tensor_datasets_.size(); ++i)
    tensor_datasets_[i].close("the dataset of '" + plan_.tensors[i].fqn + "'");
  for (std::size_t i = 0; i < value_datasets_.size(); ++i)
    value_datasets_[i].close("the dataset of '" + plan_.values[i].fqn + "'");
  for (auto& [dtype, d] : pack_datasets_) d.close("the pack of " + std::string(dtype_name(dtype)));
  pack_index_.close("the index of the packs");
  packs_group_.close("the packs' group");
  file_.close("'" + path_ + "'");
}

}  // namespace h5dcp::detail
