// load() and read_metadata(): the mirror of save.
//
//   load:metadata  broadcast   the coordinator reads the metadata once
//   load:plan      all_gather  each rank checks what it wants against it
//   load:open      all_gather  every rank opens the file (MPI-IO)
//   load:read      all_gather  each rank reads its blocks, independently
//
// Every tensor is one dataset with its global shape, so a rank reads any
// block it wants straight from it: loading with another rank count or
// another sharding is the same operation as loading with the same.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <optional>

#include "api/checkpoint_session.hpp"
#include "core/fault_injection.hpp"
#include "h5dcp/checkpoint.hpp"
#include "hdf5/container_reader.hpp"
#include "plan/codec.hpp"
#include "plan/load_plan.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/state_dict_items.hpp"

namespace h5dcp {
namespace {

using detail::Bytes;

Metadata share_metadata(const detail::Comm& comm, const std::string& path) {
  return detail::decode_metadata(comm.broadcast("load:metadata", [&] {
    detail::fault_point("load:metadata", comm.rank());
    return detail::encode(detail::read_container_metadata(path));
  }));
}

// Reads one block into `target`: straight into its memory when it is a
// contiguous CPU tensor, through a host buffer otherwise.
void read_into(detail::ContainerReader& reader, const detail::ReadItem& item, at::Tensor target) {
  if (target.device().is_cpu() && target.is_contiguous()) {
    reader.read(item.index.fqn, item.dtype, item.box, target.data_ptr());
    return;
  }
  auto staging = at::empty(target.sizes(), target.options().device(at::kCPU).memory_format(at::MemoryFormat::Contiguous));
  reader.read(item.index.fqn, item.dtype, item.box, staging.data_ptr());
  target.copy_(staging);
}

}  // namespace

Metadata read_metadata(const std::string& path, const LoadOptions& options, MPI_Comm comm) {
  detail::CheckpointSession session(comm, options.coordinator, path);
  return share_metadata(session.comm(), path);
}

void load(StateDict& state_dict, const std::string& path, const LoadOptions& options, MPI_Comm comm) {
  detail::CheckpointSession session(comm, options.coordinator, path);
  const auto& c = session.comm();
  const auto metadata = share_metadata(c, path);

  std::optional<detail::LoadPlan> plan;
  c.all_gather("load:plan", [&] {
    detail::fault_point("load:plan", c.rank());
    plan = detail::create_local_load_plan(detail::local_read_items(state_dict), metadata);
    return Bytes();
  });

  std::optional<detail::ContainerReader> reader;
  try {
    c.all_gather("load:open", [&] {
      reader.emplace(path, c.raw());
      return Bytes();
    });
    c.all_gather("load:read", [&] {
      detail::fault_point("load:read", c.rank());
      for (const auto& item : plan->items) read_into(*reader, item, find_state_dict_object(state_dict, item.index));
      return Bytes();
    });
    c.all_gather("load:close", [&] {
      auto closing = std::move(reader);
      reader.reset();
      closing->close();
      return Bytes();
    });
  } catch (...) {
    // Same CheckpointError on every rank: the close is collective on all.
    try {
      if (reader) reader->close();
    } catch (...) {
    }
    throw;
  }
}

}  // namespace h5dcp
