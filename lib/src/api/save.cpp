// save(): the seeds' two-phase protocol over MPI and one parallel HDF5 file.
//
//   save:plan    all_reduce  local plans -> coordinator's global plan -> all
//   save:create  all_gather  every rank creates the file and all datasets
//   save:write   all_gather  each rank writes the chunks assigned to it
//   save:sync    all_gather  close the file, fsync it from every rank
//   save:commit  broadcast   coordinator renames the file into place
//
// A failure in any step is a CheckpointError on every rank; after the file
// exists, the failure path closes it on every rank and the coordinator
// removes it, so nothing partial is ever published.

#include <optional>

#include "api/checkpoint_session.hpp"
#include "comm/comm.hpp"
#include "core/durable_file.hpp"
#include "core/fault_injection.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/version.hpp"
#include "hdf5/container_writer.hpp"
#include "plan/codec.hpp"
#include "torch/state_dict_items.hpp"

namespace h5dcp {
namespace {

using detail::Bytes;

Metadata metadata_of(const detail::GlobalSavePlan& plan) {
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
  return md;
}

detail::GlobalSavePlan plan_save(const detail::Comm& comm, const StateDict& state_dict, const std::string& path) {
  const Bytes global = comm.all_reduce(
      "save:plan",
      [&] {
        detail::fault_point("save:plan", comm.rank());
        auto local = detail::local_save_plan(state_dict);
        detail::validate_local_plan(local);
        return detail::encode(local);
      },
      [&](std::vector<Bytes> locals) {
        std::vector<detail::SavePlan> plans;
        for (const auto& l : locals) plans.push_back(detail::decode_save_plan(l));
        auto plan = detail::create_global_save_plan(plans);
        plan.temp_path = detail::temporary_sibling(path);
        plan.created = detail::utc_now_iso8601();
        return detail::encode(plan);
      });
  return detail::decode_global_save_plan(global);
}

}  // namespace

Metadata save(const StateDict& state_dict, const std::string& path, const SaveOptions& options, MPI_Comm comm) {
  detail::CheckpointSession session(comm, options.coordinator, path);
  const auto& c = session.comm();
  const auto plan = plan_save(c, state_dict, path);

  std::optional<detail::ContainerWriter> writer;
  try {
    c.all_gather("save:create", [&] {
      writer.emplace(plan.temp_path, c.raw(), plan);
      return Bytes();
    });
    c.all_gather("save:write", [&] {
      writer->write_chunks(c.rank(), options.io_mode, [&](const auto& tensor, const auto& chunk) {
        detail::fault_point("save:write", c.rank());
        const MetadataIndex index{tensor.fqn, tensor.sharded ? std::optional(chunk.chunk.offsets) : std::nullopt,
                                  chunk.writer_shard_index};
        return detail::host_bytes(find_state_dict_object(state_dict, index));
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
  return metadata_of(plan);
}

}  // namespace h5dcp
