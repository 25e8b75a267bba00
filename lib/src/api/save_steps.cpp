#include "api/save_steps.hpp"

#include <atomic>
#include <optional>
#include <random>
#include <utility>

#include "api/checkpoint_session.hpp"
#include "api/save_plan_cache_state.hpp"

#include "base/fault_injection.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/version.hpp"
#include "plan/chunk_geometry.hpp"
#include "plan/codec.hpp"
#include "plan/plan_reuse.hpp"
#include "storage/durable_file.hpp"
#include "torch/dtype_mapping.hpp"

namespace h5dcp::detail {

namespace {

// The coordinator's part of planning anew: the planner's merge, then what
// every save's plan carries (the temporary file, the time).
GlobalSavePlan plan_globally(const Comm& comm, SavePlanner& planner, const std::vector<SavePlan>& plans,
                             const std::string& path) {
  auto plan = planner.create_global_plan(plans);
  plan.world_size = comm.size();
  // Partial files of saves to this path that died are removed first.
  remove_partial_siblings(path);
  plan.temp_path = temporary_sibling(path);
  plan.created = utc_now_iso8601();
  return plan;
}

std::vector<SavePlan> decode_all(const std::vector<Bytes>& locals) {
  std::vector<SavePlan> plans;
  plans.reserve(locals.size());
  for (const auto& l : locals) plans.push_back(decode_save_plan(l));
  return plans;
}

// Never 0 (which means "no plan"); unique enough that two caches filled by
// different saves do not meet with the same one.
std::uint64_t new_generation() {
  static std::atomic<std::uint64_t> counter{0};
  std::random_device device;
  const std::uint64_t g = (std::uint64_t{device()} << 32) ^ device() ^ (++counter * 0x9E3779B97F4A7C15ULL);
  return g == 0 ? 1 : g;
}

PlanReply planned_reply(const Comm& comm, SavePlanner& planner, const std::vector<SavePlan>& plans,
                        const std::string& path) {
  PlanReply reply;
  reply.kind = PlanReply::Kind::Planned;
  reply.generation = new_generation();
  reply.plan = encode(plan_globally(comm, planner, plans, path));
  return reply;
}

PlannedSave plan_with_cache(const Comm& comm, SavePlanner& planner, const StateDict& state_dict,
                            const std::string& path, const std::function<void()>& prepare, SavePlanCacheState& cache) {
  SavePlan local;
  std::uint64_t digest = 0;
  auto reply = decode_plan_reply(comm.all_reduce(
      "save:plan",
      [&] {
        prepare();
        planner.set_up(state_dict, comm.is_coordinator());
        local = planner.create_local_plan();
        digest = layout_digest(local, comm.size(), comm.coordinator());
        const auto generation = offered_generation(cache.generation, cache.digest, digest);
        return encode(PlanOffer{generation, generation != 0 ? values_of(local) : local});
      },
      [&](const std::vector<Bytes>& offered) {
        std::vector<PlanOffer> offers;
        offers.reserve(offered.size());
        for (const auto& o : offered) offers.push_back(decode_plan_offer(o));
        const auto decision = plan_decision(cache.generation, offers);
        if (decision == PlanReply::Kind::Reused) {
          std::vector<SavePlan> values;
          values.reserve(offers.size());
          for (auto& o : offers) values.push_back(std::move(o.plan));
          PlanReply reply;
          reply.kind = PlanReply::Kind::Reused;
          reply.values = current_values(cache.plan, values);
          remove_partial_siblings(path);
          reply.temp_path = temporary_sibling(path);
          reply.created = utc_now_iso8601();
          return encode(reply);
        }
        if (decision == PlanReply::Kind::SendWholePlans)
          return encode(PlanReply{PlanReply::Kind::SendWholePlans, 0, {}, {}, {}, {}});
        std::vector<SavePlan> plans;
        plans.reserve(offers.size());
        for (auto& o : offers) plans.push_back(std::move(o.plan));
        return encode(planned_reply(comm, planner, plans, path));
      }));
  if (reply.kind == PlanReply::Kind::SendWholePlans) {
    // Some rank's layout changed, or some rank has no plan: plan anew.
    reply = decode_plan_reply(comm.all_reduce(
        "save:plan", [&] { return encode(local); },
        [&](const std::vector<Bytes>& locals) {
          return encode(planned_reply(comm, planner, decode_all(locals), path));
        }));
  }
  if (reply.kind == PlanReply::Kind::Reused) {
    auto plan = cache.plan;
    plan.temp_path = std::move(reply.temp_path);
    plan.created = std::move(reply.created);
    for (std::size_t v = 0; v < plan.values.size(); ++v) plan.values[v].payload = std::move(reply.values.at(v));
    ++cache.reused;
    return {std::move(plan), true};
  }
  auto plan = decode_global_save_plan(reply.plan);
  cache.plan = plan;
  cache.generation = reply.generation;
  cache.digest = digest;
  ++cache.planned;
  return {std::move(plan), false};
}

}  // namespace

PlannedSave plan_save(const Comm& comm, SavePlanner& planner, const StateDict& state_dict, const std::string& path,
                      const std::function<void()>& prepare, SavePlanCache* cache) {
  if (cache != nullptr)
    return plan_with_cache(comm, planner, state_dict, path, prepare, SavePlanCacheAccess::state(*cache));
  const Bytes global = comm.all_reduce(
      "save:plan",
      [&] {
        prepare();
        planner.set_up(state_dict, comm.is_coordinator());
        return encode(planner.create_local_plan());
      },
      [&](const std::vector<Bytes>& locals) { return encode(plan_globally(comm, planner, decode_all(locals), path)); });
  return {decode_global_save_plan(global), false};
}

std::vector<TensorChecksums> assemble_checksums(const GlobalSavePlan& plan, const std::vector<Bytes>& per_rank) {
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
      writer->write_checksums(assemble_checksums(plan, checksums));
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

std::vector<Setting> save_settings(const SaveOptions& options) {
  return {{"io_mode", io_mode_text(options.io_mode)}, {"plan_cache", options.plan_cache != nullptr ? "yes" : "no"}};
}

SaveResult save_result_of(const GlobalSavePlan& plan, bool plan_reused) {
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
  return SaveResult{std::move(md), plan.bytes_per_rank(), plan_reused};
}

}  // namespace h5dcp::detail
