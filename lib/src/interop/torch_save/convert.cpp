// torch_save_to_checkpoint() and checkpoint_to_torch_save(): conversions in
// bounded memory.
//
// torch.save -> checkpoint, collective:
//   convert:index  broadcast   the coordinator reads data.pkl once and shares its index
//   convert:open   all_gather  every rank opens the source for its own reads
//   convert:plan   all_gather  every rank builds a state dict of placeholders:
//                              its dim-0 rows of large tensors, small ones whole
//   save(...)                  the usual save; the planner's resolve_tensor reads
//                              each block straight from the storage record, so a
//                              rank holds one block at a time
//
// checkpoint -> torch.save, one process: data.pkl first (from the metadata),
// then each tensor's record is streamed, slab by slab, each slab's checksums
// checked as it is read.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>

#include "api/checkpoint_session.hpp"
#include "comm/comm.hpp"
#include "formats/pickle_writer.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/planner.hpp"
#include "h5dcp/torch_save.hpp"
#include "interop/shared/export_files.hpp"
#include "interop/shared/indexed_convert.hpp"
#include "interop/shared/source_files.hpp"
#include "interop/torch_save/archive.hpp"
#include "interop/torch_save/tree.hpp"
#include "storage/file_descriptor.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/value_codec.hpp"

namespace h5dcp {
namespace {

using detail::Bytes;
using detail::read_block;
using detail::Shape;
using detail::SourceFiles;

// The most a rank holds of one tensor at once: larger blocks are written as
// slabs of at most this many bytes, each read, written and dropped in turn.
// It bounds memory where a tensor is far larger than the file: a view that
// repeats its storage's elements (stride 0, as Tensor.expand makes, which
// torch.save saves as the small storage and its strides) is materialised
// slab by slab, never whole.
constexpr std::int64_t kConvertSlabBytes = std::int64_t{64} << 20;

// A tensor of `shape` and `dtype` that allocates (almost) nothing: what the
// save planner plans with before resolve_tensor reads the real bytes.
at::Tensor placeholder(DType dtype, const Shape& shape) {
  return at::empty({}, at::TensorOptions().dtype(detail::to_scalar_type(dtype))).expand(shape);
}

// The block at `offsets` of `sizes` in a tensor, as shards of at most kConvertSlabBytes.
void add_slabs(std::vector<Shard>& shards, DType dtype, const Shape& offsets, const Shape& sizes) {
  for (auto& slab : detail::split_block(sizes, static_cast<std::int64_t>(dtype_size(dtype)), kConvertSlabBytes)) {
    for (std::size_t d = 0; d < offsets.size(); ++d) slab.offsets[d] += offsets[d];
    shards.push_back(Shard{placeholder(dtype, slab.sizes), slab.offsets});
  }
}

// Tensors stored in chunks (a DCP checkpoint's shards): every rank writes the
// pieces it is given, a chunk's pieces being slabs of its rows (one per rank
// for chunks of at least split_min_bytes), handed out in index order to the
// rank with the fewest bytes so far. Every rank computes the same split.
void add_chunked(FlatStateDict& flat, const detail::TorchSaveIndex& index, std::int64_t split_min_bytes, int rank,
                 int size) {
  std::vector<std::int64_t> load(static_cast<std::size_t>(size), 0);
  for (const auto& [fqn, t] : index.chunked) {
    if (detail::volume(t.size) == 0) {
      flat.leaves.emplace(fqn, placeholder(t.dtype, t.size));
      continue;
    }
    const auto element = static_cast<std::int64_t>(dtype_size(t.dtype));
    std::vector<Shard> shards;
    for (const auto& chunk : t.chunks) {
      const auto& box = chunk.box;
      const auto bytes = detail::volume(box.sizes) * element;
      if (bytes == 0) continue;
      const auto rows = box.sizes.empty() ? 1 : box.sizes[0];
      const auto parts = size > 1 && bytes >= split_min_bytes ? std::min<std::int64_t>(rows, size) : 1;
      for (std::int64_t p = 0; p < parts; ++p) {
        auto offsets = box.offsets;
        auto sizes = box.sizes;
        if (parts > 1) {
          const auto start = rows * p / parts;
          offsets[0] += start;
          sizes[0] = rows * (p + 1) / parts - start;
        }
        const auto least = std::min_element(load.begin(), load.end()) - load.begin();
        load[static_cast<std::size_t>(least)] += detail::volume(sizes) * element;
        if (least == rank) add_slabs(shards, t.dtype, offsets, sizes);
      }
    }
    flat.leaves.emplace(fqn, ShardedTensor(t.size, std::move(shards)));
  }
}

StateDict placeholder_state(const detail::TorchSaveIndex& index, std::int64_t split_min_bytes, int rank, int size) {
  FlatStateDict flat;
  flat.containers = index.containers;
  for (const auto& [fqn, t] : index.tensors) {
    const auto rows = t.sizes.empty() ? 0 : t.sizes[0];
    if (size == 1 || rows == 0 || detail::volume(t.sizes) == 0 || detail::tensor_bytes(t) < split_min_bytes) {
      if (detail::tensor_bytes(t) <= kConvertSlabBytes) {
        flat.leaves.emplace(fqn, placeholder(t.dtype, t.sizes));  // whole; written once, by the least-loaded rank
        continue;
      }
      // Too large for one block: rank 0 writes it, slab by slab.
      std::vector<Shard> shards;
      if (rank == 0) add_slabs(shards, t.dtype, Shape(t.sizes.size(), 0), t.sizes);
      flat.leaves.emplace(fqn, ShardedTensor(t.sizes, std::move(shards)));
      continue;
    }
    // torch.chunk's split of dim 0: ceil(rows / size) rows each, the last ranks fewer or none.
    const auto per_rank = (rows + size - 1) / size;
    const auto start = std::min<std::int64_t>(rows, per_rank * rank);
    const auto count = std::max<std::int64_t>(0, std::min(per_rank, rows - start));
    std::vector<Shard> shards;
    if (count > 0) {
      auto shape = t.sizes;
      shape[0] = count;
      Shape offsets(t.sizes.size(), 0);
      offsets[0] = start;
      add_slabs(shards, t.dtype, offsets, shape);
    }
    flat.leaves.emplace(fqn, ShardedTensor(t.sizes, std::move(shards)));
  }
  add_chunked(flat, index, split_min_bytes, rank, size);
  for (const auto& [fqn, v] : index.values) flat.leaves.emplace(fqn, detail::decode_value(v.encoding, v.payload, fqn));
  return unflatten_state_dict(flat);
}

class TorchSaveSourcePlanner final : public DefaultSavePlanner {
 public:
  TorchSaveSourcePlanner(const detail::TorchSaveIndex& index, const SourceFiles& files, ProgressCallback progress,
                         Progress totals)
      : index_(index), files_(files), callback_(std::move(progress)), progress_(std::move(totals)) {}

  at::Tensor resolve_tensor(const PlannedTensor& tensor, const PlannedChunk& chunk) override {
    auto block = read(tensor.fqn, chunk.chunk);
    if (callback_) {
      progress_.items_done += 1;
      progress_.bytes_done += static_cast<std::int64_t>(block.nbytes());
      progress_.current = tensor.fqn;
      callback_(progress_);
    }
    return block;
  }

 private:
  // The block `box` of `fqn`, from its storage, or from the one stored chunk that holds it.
  at::Tensor read(const std::string& fqn, const ChunkStorageMetadata& box) const {
    const auto whole = index_.tensors.find(fqn);
    if (whole != index_.tensors.end()) {
      const auto& storage = index_.storages.at(whole->second.storage);
      return read_block(files_.of(storage), storage, whole->second, box);
    }
    for (const auto& stored : index_.chunked.at(fqn).chunks) {
      if (!detail::contains(stored.box, box)) continue;
      ChunkStorageMetadata inside{box.offsets, box.sizes};
      for (std::size_t d = 0; d < inside.offsets.size(); ++d) inside.offsets[d] -= stored.box.offsets[d];
      const auto& storage = index_.storages.at(stored.view.storage);
      return read_block(files_.of(storage), storage, stored.view, inside);
    }
    throw UsageError("h5dcp: no stored chunk of '" + fqn + "' holds the block " + detail::describe_box(box));
  }

  const detail::TorchSaveIndex& index_;
  const SourceFiles& files_;
  ProgressCallback callback_;
  Progress progress_;
};

}  // namespace

namespace detail {

SaveResult convert_index_to_checkpoint(const std::function<Bytes()>& read_index, const std::string& src,
                                       const std::string& dst, const TorchSaveToCheckpointOptions& options,
                                       MPI_Comm comm) {
  Comm c(comm, options.coordinator);
  c.require_same("source paths", src);
  c.set_timeout(resolve_timeout(options.timeout_seconds));
  const auto index = decode_torch_save_index(c.broadcast("convert:index", read_index));
  std::optional<SourceFiles> files;
  c.all_gather("convert:open", [&] {
    files.emplace(src, index);
    return Bytes();
  });
  StateDict state;
  c.all_gather("convert:plan", [&] {
    state = placeholder_state(index, options.split_min_bytes, c.rank(), c.size());
    return Bytes();
  });
  Progress totals;
  if (c.size() == 1) {  // with more ranks, who writes the small tensors is the planner's choice
    for (const auto& [fqn, t] : index.tensors) {
      // One block per slab; empty tensors have none.
      totals.items_total += static_cast<std::int64_t>(
          split_block(t.sizes, static_cast<std::int64_t>(dtype_size(t.dtype)), kConvertSlabBytes).size());
      totals.bytes_total += tensor_bytes(t);
    }
    for (const auto& [fqn, t] : index.chunked)
      for (const auto& chunk : t.chunks) {
        totals.items_total += static_cast<std::int64_t>(
            split_block(chunk.box.sizes, static_cast<std::int64_t>(dtype_size(t.dtype)), kConvertSlabBytes).size());
        totals.bytes_total += volume(chunk.box.sizes) * static_cast<std::int64_t>(dtype_size(t.dtype));
      }
  }
  TorchSaveSourcePlanner planner(index, *files, options.progress, totals);
  SaveOptions save_options;
  save_options.coordinator = options.coordinator;
  save_options.io_mode = options.io_mode;
  save_options.timeout_seconds = options.timeout_seconds;
  save_options.planner = &planner;
  return save(state, dst, save_options, comm);
}

}  // namespace detail

SaveResult torch_save_to_checkpoint(const std::string& src, const std::string& dst,
                                    const TorchSaveToCheckpointOptions& options, MPI_Comm comm) {
  return detail::convert_index_to_checkpoint(
      [&] {
        detail::TorchSaveReader reader(src);
        return detail::encode(reader.read_index());
      },
      src, dst, options, comm);
}

void checkpoint_to_torch_save(const std::string& src, const std::string& dst,
                              const CheckpointToTorchSaveOptions& options) {
  detail::ExportSource source(src);
  const auto& index = source.index();
  const auto& metadata = index.metadata;

  FlatStateDict flat;
  flat.containers = metadata.containers;
  Progress progress;
  for (const auto& [fqn, storage] : metadata.state_dict_metadata) {
    if (const auto* t = std::get_if<TensorStorageMetadata>(&storage)) {
      flat.leaves.emplace(fqn, placeholder(t->properties.dtype, t->size));
      progress.items_total += 1;
      progress.bytes_total += detail::volume(t->size) * static_cast<std::int64_t>(dtype_size(t->properties.dtype));
    } else {
      const auto& encoding = std::get<BytesStorageMetadata>(storage).encoding;
      flat.leaves.emplace(fqn, detail::decode_value(encoding, index.values.at(fqn), fqn));
    }
  }

  // data.pkl first: every tensor gets a storage of its own, in tree order.
  std::vector<std::pair<std::string, std::shared_ptr<const detail::pickle::Storage>>> records;
  const auto root = detail::pickle_tree(unflatten_state_dict(flat), [&](const std::string& fqn, const at::Tensor&) {
    const auto& t = find_tensor_metadata(metadata, fqn);
    auto storage = std::make_shared<detail::pickle::Storage>();
    storage->key = std::to_string(records.size());
    storage->dtype = t.properties.dtype;
    storage->numel = detail::volume(t.size);
    records.emplace_back(fqn, storage);
    return detail::pickle::Object::tensor_of({storage, 0, t.size, detail::contiguous_strides(t.size)});
  });
  const auto data = detail::pickle::pickle(*root);

  detail::TorchSaveWriter writer(dst);
  writer.write_record("data.pkl", data.data(), data.size());
  // Each record streamed in checked pieces of whole rows, which follow each
  // other in the record: memory holds one piece, never a whole tensor.
  for (const auto& [fqn, storage] : records) {
    const auto& t = find_tensor_metadata(metadata, fqn);
    const auto bytes = detail::volume(t.size) * static_cast<std::int64_t>(dtype_size(t.properties.dtype));
    writer.begin_record("data/" + storage->key, static_cast<std::uint64_t>(bytes));
    source.read_in_pieces(fqn, {detail::Shape(t.size.size(), 0), t.size},
                          [&](const ChunkStorageMetadata&, const at::Tensor& piece) {
                            writer.append_record(piece.data_ptr(), static_cast<std::size_t>(piece.nbytes()));
                          });
    writer.end_record();
    if (options.progress) {
      progress.items_done += 1;
      progress.bytes_done += bytes;
      progress.current = fqn;
      options.progress(progress);
    }
  }
  source.close();
  writer.commit();
}

}  // namespace h5dcp
