// save(): the seeds' two-phase protocol over MPI and one parallel HDF5 file.
//
//   save:plan    all_reduce  local plans -> coordinator's global plan -> all
//   save:create  all_gather  every rank creates the file, groups and datasets
//   save:write   all_gather  each rank writes the blocks and values assigned to it
//   save:sync    all_gather  close the file, fsync it from every rank
//   save:commit  broadcast   coordinator renames the file into place
//
// A failure in any step is a CheckpointError on every rank; after the file
// exists, the failure path closes it on every rank and the coordinator
// removes it, so nothing partial is ever published.

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>

#include "api/checkpoint_session.hpp"
#include "api/stateful_expansion.hpp"
#include "core/durable_file.hpp"
#include "core/fault_injection.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/planner.hpp"
#include "h5dcp/version.hpp"
#include "hdf5/container_writer.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/codec.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/host_bytes.hpp"

namespace h5dcp {
namespace {

using detail::Bytes;

Metadata metadata_of(const GlobalSavePlan& plan) {
  Metadata md;
  md.format_version_major = kFormatVersionMajor;
  md.format_version_minor = kFormatVersionMinor;
  md.library_version = kLibraryVersion;
  md.world_size = plan.world_size;
  md.created = plan.created;
  for (const auto& t : plan.tensors) {
    TensorStorageMetadata storage{{t.dtype}, t.global_shape, {}};
    for (const auto& c : t.chunks) storage.chunks.push_back(c.chunk);
    md.state_dict_metadata.emplace(t.fqn, std::move(storage));
  }
  for (const auto& v : plan.values)
    md.state_dict_metadata.emplace(v.fqn, BytesStorageMetadata{v.encoding, static_cast<std::int64_t>(v.payload.size())});
  for (const auto& [fqn, kind] : plan.containers) md.containers.emplace(fqn, kind);
  return md;
}

GlobalSavePlan plan_save(const detail::Comm& comm, SavePlanner& planner, const StateDict& state_dict,
                         const std::string& path, const std::function<void()>& prepare) {
  const Bytes global = comm.all_reduce(
      "save:plan",
      [&] {
        detail::fault_point("save:plan", comm.rank());
        prepare();
        planner.set_up(state_dict, comm.is_coordinator());
        return detail::encode(planner.create_local_plan());
      },
      [&](std::vector<Bytes> locals) {
        std::vector<SavePlan> plans;
        for (const auto& l : locals) plans.push_back(detail::decode_save_plan(l));
        auto plan = planner.create_global_plan(plans);
        plan.world_size = comm.size();
        plan.temp_path = detail::temporary_sibling(path);
        plan.created = detail::utc_now_iso8601();
        return detail::encode(plan);
      });
  return detail::decode_global_save_plan(global);
}

// The bytes of a block the planner resolved, checked against the plan.
std::shared_ptr<const void> block_bytes(SavePlanner& planner, const PlannedTensor& tensor, const PlannedChunk& chunk) {
  const auto data = planner.resolve_tensor(tensor, chunk);
  const Shape shape(data.sizes().begin(), data.sizes().end());
  if (shape != chunk.chunk.sizes || data.scalar_type() != detail::to_scalar_type(tensor.dtype))
    throw UsageError("h5dcp: the tensor resolved for block " + detail::describe_box(chunk.chunk) + " of '" +
                     tensor.fqn + "' is " + std::string(c10::toString(data.scalar_type())) + " " +
                     detail::describe_shape(shape) + ", not " + std::string(dtype_name(tensor.dtype)) + " " +
                     detail::describe_shape(chunk.chunk.sizes));
  return detail::host_bytes(data);
}

}  // namespace

SaveResult save(const StateDict& state_dict, const std::string& path, const SaveOptions& options, MPI_Comm comm) {
  detail::CheckpointSession session(comm, options.coordinator, path);
  const auto& c = session.comm();
  DefaultSavePlanner default_planner;
  SavePlanner& planner = options.planner != nullptr ? *options.planner : default_planner;
  // Stateful objects are saved as their state dicts; asking them is part of
  // planning, so a throw there fails the save on every rank.
  StateDict expanded;
  const bool expand = detail::has_stateful(state_dict);
  const StateDict& to_save = expand ? expanded : state_dict;
  const auto plan = plan_save(c, planner, to_save, path, [&] {
    if (expand) expanded = detail::expand_for_save(state_dict);
  });

  std::optional<detail::ContainerWriter> writer;
  try {
    c.all_gather("save:create", [&] {
      writer.emplace(plan.temp_path, c.raw(), plan);
      return Bytes();
    });
    c.all_gather("save:write", [&] {
      writer->write(c.rank(), options.io_mode, [&](const PlannedTensor& tensor, const PlannedChunk& chunk) {
        detail::fault_point("save:write", c.rank());
        return block_bytes(planner, tensor, chunk);
      });
      return Bytes();
    });
    c.all_gather("save:sync", [&] {
      // Taken out of `writer` first, so a failing close is not retried below.
      auto closing = std::move(writer);
      writer.reset();
      closing->close();
      detail::fault_point("save:sync", c.rank());
      // Every rank syncs: on a parallel file system one client's fsync does
      // not flush another client's pages.
      detail::fsync_file(plan.temp_path);
      return Bytes();
    });
    c.broadcast("save:commit", [&] {
      detail::fault_point("save:commit", c.rank());
      detail::publish_by_rename(plan.temp_path, path);
      return Bytes();
    });
  } catch (...) {
    // Every rank is here with the same CheckpointError: the close below is
    // collective on all of them (or on none).
    try {
      if (writer) writer->close();
    } catch (...) {
    }
    writer.reset();
    if (c.is_coordinator()) detail::remove_quietly(plan.temp_path);
    throw;
  }
  return SaveResult{metadata_of(plan), plan.bytes_per_rank()};
}

}  // namespace h5dcp
