#include "api/save_steps.hpp"

#include <optional>
#include <utility>

#include "base/fault_injection.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/version.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/codec.hpp"
#include "storage/durable_file.hpp"
#include "torch/dtype_mapping.hpp"

namespace h5dcp::detail {

GlobalSavePlan plan_save(const Comm& comm, SavePlanner& planner, const StateDict& state_dict, const std::string& path,
                         const std::function<void()>& prepare) {
  const Bytes global = comm.all_reduce(
      "save:plan",
      [&] {
        prepare();
        planner.set_up(state_dict, comm.is_coordinator());
        return encode(planner.create_local_plan());
      },
      [&](const std::vector<Bytes>& locals) {
        std::vector<SavePlan> plans;
        plans.reserve(locals.size());
        for (const auto& l : locals) plans.push_back(decode_save_plan(l));
        auto plan = planner.create_global_plan(plans);
        plan.world_size = comm.size();
        // Partial files of saves to this path that died are removed first.
        remove_partial_siblings(path);
        plan.temp_path = temporary_sibling(path);
        plan.created = utc_now_iso8601();
        return encode(plan);
      });
  return decode_global_save_plan(global);
}

namespace {

// Every rank's chunk checksums, arranged per tensor in chunk order.
std::vector<TensorChecksums> assemble(const GlobalSavePlan& plan, const std::vector<Bytes>& per_rank) {
  std::vector<std::vector<const ChunkChecksums*>> found(plan.tensors.size());
  std::vector<std::vector<ChunkChecksums>> decoded;
  decoded.reserve(per_rank.size());
  for (const auto& b : per_rank) decoded.push_back(decode_chunk_checksums(b));
  for (std::size_t t = 0; t < plan.tensors.size(); ++t) found[t].assign(plan.tensors[t].chunks.size(), nullptr);
  for (const auto& rank_checksums : decoded)
    for (const auto& c : rank_checksums) found.at(c.tensor).at(c.chunk) = &c;
  std::vector<TensorChecksums> out(plan.tensors.size());
  for (std::size_t t = 0; t < plan.tensors.size(); ++t) {
    for (std::size_t k = 0; k < plan.tensors[t].chunks.size(); ++k) {
      const auto* c = found[t][k];
      if (c == nullptr) {
        if (volume(plan.tensors[t].chunks[k].chunk.sizes) != 0 && volume(plan.tensors[t].global_shape) != 0)
          throw Error("h5dcp: no checksums for block " + describe_box(plan.tensors[t].chunks[k].chunk) + " of '" +
                      plan.tensors[t].fqn + "'");
        out[t].rows.push_back(0);
        continue;
      }
      out[t].rows.push_back(c->rows);
      out[t].digests.insert(out[t].digests.end(), c->digests.begin(), c->digests.end());
    }
  }
  return out;
}

}  // namespace

void write_and_publish(const Comm& c, const GlobalSavePlan& plan, const std::string& path,
                       const std::function<std::vector<ChunkChecksums>(ContainerWriter&)>& write) {
  std::optional<ContainerWriter> writer;
  try {
    c.all_gather("save:create", [&] {
      writer.emplace(plan.temp_path, c.raw(), plan);
      return Bytes();
    });
    // The space the data will take is reserved before any is written: a full
    // disk then fails here, cleanly, not inside a collective write.
    c.broadcast("save:reserve", [&] {
      reserve_space(plan.temp_path, writer->allocated_bytes());
      return Bytes();
    });
    const auto checksums = c.all_gather("save:write", [&] { return encode(write(*writer)); });
    c.all_gather("save:checksums", [&] {
      writer->write_checksums(assemble(plan, checksums));
      return Bytes();
    });
    c.all_gather("save:sync", [&] {
      // Taken out of `writer` first, so a failing close is not retried below.
      auto closing = std::exchange(writer, std::nullopt);
      closing->close();
      // Every rank syncs: on a parallel file system one client's fsync does
      // not flush another client's pages.
      fsync_file(plan.temp_path);
      return Bytes();
    });
    c.broadcast("save:commit", [&] {
      // Placed before the rename (Comm's would come after the map, and then
      // does not fire): a commit that fails must fail before it publishes.
      fault_point("save:commit", c.rank());
      publish_by_rename(plan.temp_path, path);
      return Bytes();
    });
  } catch (...) {
    // Every rank is here with the same CheckpointError: the close below is
    // collective on all of them (or on none).
    // ... unless a rank did not arrive in time: it would wait for that rank.
    try {
      if (writer && !c.timed_out()) writer->close();
      if (writer && c.timed_out()) writer->abandon();
    } catch (...) {
    }
    writer.reset();
    if (c.is_coordinator()) remove_quietly(plan.temp_path);
    throw;
  }
}

at::Tensor resolve_block(SavePlanner& planner, const PlannedTensor& tensor, const PlannedChunk& chunk) {
  auto data = planner.resolve_tensor(tensor, chunk);
  const Shape shape(data.sizes().begin(), data.sizes().end());
  if (shape != chunk.chunk.sizes || data.scalar_type() != to_scalar_type(tensor.dtype))
    throw UsageError("h5dcp: the tensor resolved for block " + describe_box(chunk.chunk) + " of '" + tensor.fqn +
                     "' is " + std::string(c10::toString(data.scalar_type())) + " " + describe_shape(shape) + ", not " +
                     std::string(dtype_name(tensor.dtype)) + " " + describe_shape(chunk.chunk.sizes));
  return data;
}

SaveResult save_result_of(const GlobalSavePlan& plan) {
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
    md.state_dict_metadata.emplace(v.fqn,
                                   BytesStorageMetadata{v.encoding, static_cast<std::int64_t>(v.payload.size())});
  for (const auto& [fqn, kind] : plan.containers) md.containers.emplace(fqn, kind);
  return SaveResult{std::move(md), plan.bytes_per_rank()};
}

}  // namespace h5dcp::detail
