// load(), load_all() and read_metadata(): the mirror of save.
//
//   load:metadata  broadcast   the coordinator reads metadata and values once
//   load:plan      all_gather  each rank plans its reads, checked against it
//   load:open      all_gather  every rank opens the file (MPI-IO)
//   load:read      all_gather  each rank reads its blocks, independently
//   load:close     all_gather  every rank closes the file
//
// Every tensor is one dataset with its global shape, or one range of its
// dtype's pack (format 1.2, small tensors), so a rank reads any
// block it wants straight from it: loading with another rank count or
// another sharding is the same operation as loading with the same.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "api/checkpoint_session.hpp"
#include "api/stateful_expansion.hpp"
#include "api/verified_read.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/planner.hpp"
#include "hdf5/container_reader.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/codec.hpp"
#include "torch/device_copies.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/empty_tensors.hpp"
#include "torch/state_from_metadata.hpp"
#include "torch/tensor_blocks.hpp"
#include "torch/value_codec.hpp"

namespace h5dcp {
namespace {

using detail::Bytes;

detail::CheckpointIndex share_index(const detail::Comm& comm, const std::string& path) {
  return detail::decode_checkpoint_index(
      comm.broadcast("load:metadata", [&] { return detail::encode(detail::read_container_index(path)); }));
}

// Reads one block into `block`: straight into its memory when it is a
// contiguous CPU tensor of the stored dtype, through a host buffer otherwise
// (other device, strides, or a dtype to convert to; to a GPU asynchronously).
void read_into(detail::ContainerReader& reader, const ReadItem& item, const at::Tensor& block,
               detail::HostToDevice& uploads) {
  const ChunkStorageMetadata box{item.storage_offsets, item.lengths};
  const auto stored = detail::to_scalar_type(item.dtype);
  if (block.device().is_cpu() && block.is_contiguous() && block.scalar_type() == stored) {
    reader.read(item.storage_fqn, item.dtype, box, block.data_ptr());
    return;
  }
  auto staging = uploads.buffer(block.sizes(), stored, block);
  reader.read(item.storage_fqn, item.dtype, box, staging.data_ptr());
  uploads.copy(staging, block);
}

// The plan's items in the order they are read: packed tensors (format 1.2)
// last, in the order they lie in their packs, so that the reader takes them
// in a few long reads (plan/pack_runs.hpp); the rest in the plan's order.
std::vector<const ReadItem*> read_order(const LoadPlan& plan, const detail::ContainerReader& reader) {
  // Each item's place, looked up once (not in every comparison).
  using Place = std::tuple<bool, int, std::int64_t, std::size_t>;
  std::vector<Place> places;
  places.reserve(plan.items.size());
  for (std::size_t i = 0; i < plan.items.size(); ++i) {
    const auto& item = plan.items[i];
    const auto* row = item.type == ReadItemType::Tensor ? reader.packed_row(item.storage_fqn) : nullptr;
    places.emplace_back(row != nullptr, row == nullptr ? 0 : static_cast<int>(row->dtype),
                        row == nullptr ? 0 : row->offset, i);
  }
  std::sort(places.begin(), places.end());  // the index last: stable
  std::vector<const ReadItem*> order;
  order.reserve(places.size());
  for (const auto& place : places) order.push_back(&plan.items[std::get<3>(place)]);
  return order;
}

// `own_planner`: the planner is h5dcp's, whose commit_tensor does nothing,
// so blocks still copying to a GPU need not be waited for before it.
LoadResult load_with(const detail::Comm& c, const std::string& path, const detail::CheckpointIndex& index,
                     LoadPlanner& planner, StateDict& state_dict, bool verify, bool own_planner) {
  std::optional<LoadPlan> plan;
  c.all_gather("load:plan", [&] {
    planner.set_up(state_dict, index.metadata, c.is_coordinator());
    plan = planner.create_local_plan();
    return Bytes();
  });

  std::optional<detail::ContainerReader> reader;
  try {
    c.all_gather("load:open", [&] {
      reader.emplace(path, c.raw());
      return Bytes();
    });
    c.all_gather("load:read", [&] {
      // Copies to a GPU follow the work the caller queued on the targets.
      detail::HostToDevice uploads{detail::CallerWork(state_dict)};
      const auto order = read_order(*plan, *reader);
      // h5dcp's planner resolves a block by looking it up, nothing more: its
      // blocks are known before the reads, and the reader puts runs of
      // packed tensors straight into them. A user's planner resolves each
      // block when its turn comes (it may make it then).
      std::vector<at::Tensor> blocks(order.size());
      if (own_planner)
        for (std::size_t i = 0; i < order.size(); ++i)
          if (order[i]->type == ReadItemType::Tensor)
            blocks[i] = detail::dest_block(planner.resolve_tensor(*order[i]), *order[i]);
      // The kernel reads ahead what comes next while each block is read.
      for (std::size_t i = 0; i < order.size(); ++i) {
        const auto& item = *order[i];
        if (item.type != ReadItemType::Tensor) continue;
        const auto& block = blocks[i];
        const bool in_place = block.defined() && block.device().is_cpu() && block.is_contiguous() &&
                              block.scalar_type() == detail::to_scalar_type(item.dtype);
        reader->will_read(item.storage_fqn, item.dtype, ChunkStorageMetadata{item.storage_offsets, item.lengths},
                          in_place ? block.data_ptr() : nullptr);
      }
      for (std::size_t i = 0; i < order.size(); ++i) {
        const auto& item = *order[i];
        if (item.type == ReadItemType::Value) {
          const auto& storage = std::get<BytesStorageMetadata>(index.metadata.state_dict_metadata.at(item.storage_fqn));
          planner.load_value(
              item, detail::decode_value(storage.encoding, index.values.at(item.storage_fqn), item.storage_fqn));
          continue;
        }
        const auto dest = own_planner ? blocks[i] : planner.resolve_tensor(item);
        const auto block = own_planner ? blocks[i] : detail::dest_block(dest, item);
        const auto sums = verify ? index.checksums.find(item.storage_fqn) : index.checksums.end();
        if (sums != index.checksums.end())
          detail::read_verified(
              *reader, item, block,
              std::get<TensorStorageMetadata>(index.metadata.state_dict_metadata.at(item.storage_fqn)), sums->second,
              uploads);
        else
          read_into(*reader, item, block, uploads);
        if (!own_planner) uploads.finish();  // a user's commit_tensor may read the block
        planner.commit_tensor(item, dest);
      }
      uploads.finish();
      return Bytes();
    });
    c.all_gather("load:close", [&] {
      // Taken out of `reader` first, so a failing close is not retried below.
      auto closing = std::exchange(reader, std::nullopt);
      closing->close();
      return Bytes();
    });
  } catch (...) {
    // Same CheckpointError on every rank: the close is collective on all,
    // unless a rank did not arrive in time (it would wait for that rank).
    try {
      if (reader && !c.timed_out()) reader->close();
      if (reader && c.timed_out()) reader->abandon();
    } catch (...) {
    }
    throw;
  }
  return LoadResult{plan->missing, plan->unexpected};
}

// A tensor of `storage` for load_all: whole, or this rank's rows of it.
StateValue empty_tensor_for(const TensorStorageMetadata& storage, LoadLayout layout, int rank, int size) {
  const auto options = at::TensorOptions().dtype(detail::to_scalar_type(storage.properties.dtype));
  if (layout == LoadLayout::Whole || storage.size.empty()) return at::empty(storage.size, options);
  return detail::empty_chunked_dim0(storage.size, options, rank, size);
}

}  // namespace

Metadata read_metadata(const std::string& path, const ReadMetadataOptions& options, MPI_Comm comm) {
  // Only the coordinator reads: no rank needs to see the file but it.
  detail::CheckpointSession session(comm, options.coordinator, "read_metadata", path, options.timeout_seconds);
  return share_index(session.comm(), path).metadata;
}

LoadResult load(StateDict& state_dict, const std::string& path, const LoadOptions& options, MPI_Comm comm) {
  detail::CheckpointSession session(comm, options.coordinator, "load", path, options.timeout_seconds,
                                    {{"strict", detail::bool_text(options.strict)},
                                     {"convert_dtype", detail::bool_text(options.convert_dtype)},
                                     {"verify_checksums", detail::bool_text(options.verify_checksums)}});
  session.require_readable_everywhere();  // every rank opens it (collectively)
  const auto& c = session.comm();
  const auto index = share_index(c, path);
  DefaultLoadPlanner default_planner(options.strict, options.convert_dtype);
  LoadPlanner& planner = options.planner != nullptr ? *options.planner : default_planner;
  if (!detail::has_stateful(state_dict))
    return load_with(c, path, index, planner, state_dict, options.verify_checksums, options.planner == nullptr);

  // Stateful objects: load into their state dicts, then hand them the result.
  detail::LoadExpansion expansion;
  c.all_gather("load:expand", [&] {
    expansion = detail::expand_for_load(state_dict, index.metadata);
    return Bytes();
  });
  auto result =
      load_with(c, path, index, planner, expansion.target, options.verify_checksums, options.planner == nullptr);
  c.all_gather("load:commit", [&] {
    detail::commit_load(expansion, state_dict);
    return Bytes();
  });
  return result;
}

StateDict load_all(const std::string& path, const LoadAllOptions& options, MPI_Comm comm) {
  detail::CheckpointSession session(comm, options.coordinator, "load_all", path, options.timeout_seconds,
                                    {{"layout", detail::layout_text(options.layout)},
                                     {"verify_checksums", detail::bool_text(options.verify_checksums)}});
  session.require_readable_everywhere();  // every rank opens it (collectively)
  const auto& c = session.comm();
  const auto index = share_index(c, path);
  StateDict state_dict;
  c.all_gather("load:allocate", [&] {
    state_dict =
        detail::state_from_metadata(index.metadata, "", [&](const std::string&, const TensorStorageMetadata& t) {
          return empty_tensor_for(t, options.layout, c.rank(), c.size());
        });
    return Bytes();
  });
  DefaultLoadPlanner planner(/*strict=*/true, /*convert_dtype=*/false);
  load_with(c, path, index, planner, state_dict, options.verify_checksums, /*own_planner=*/true);
  return state_dict;
}

}  // namespace h5dcp
