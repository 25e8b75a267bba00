#include "api/local_save.hpp"

#include <ATen/core/Tensor.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <set>

#include "api/save_steps.hpp"
#include "api/stateful_expansion.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/planner.hpp"
#include "hdf5/container_writer.hpp"
#include "hdf5/local_file.hpp"
#include "plan/block_writes.hpp"
#include "plan/codec.hpp"
#include "storage/durable_file.hpp"
#include "torch/host_bytes.hpp"

namespace h5dcp::detail {
namespace {

// How many steps' layouts a rank remembers: a spare is the step just beyond
// the tier's `keep`, so a tier keeping more steps than this makes its copies
// anew.
constexpr std::size_t kLayoutsKept = 1024;

// Whether the file at `path` is a copy this rank wrote that it can write
// `identity`'s step over in place: a copy of the same run, owner and
// replica, of a step written with the layout staged now.
bool rewritable(const std::string& path, const LocalFileIdentity& identity, const StagedLocalStep& staged) {
  if (::access(path.c_str(), F_OK) != 0) return false;
  try {
    const auto found = read_local_identity(path);
    const auto layout = staged.layout_of_step.find(found.step);
    return found.run_id == identity.run_id && found.owner_rank == identity.owner_rank &&
           found.replica == identity.replica && layout != staged.layout_of_step.end() &&
           layout->second == staged.layout;
  } catch (const Error&) {
    return false;  // made anew
  }
}

// Writes one owner's copy: a checkpoint file of the whole plan in which only
// `blocks` (the owner's, their bytes from `data`) and every value are
// written, with every chunk's checksums and the copy's identity; fsynced.
// In place (`rewrite`: a copy of the same layout is at `path`), only the
// data, the checksums, the values and the step change.
void write_copy(const std::string& path, const GlobalSavePlan& plan, const std::vector<TensorChecksums>& checksums,
                const LocalFileIdentity& identity, const std::vector<BlockWrite>& blocks,
                const std::function<const void*(std::size_t)>& data, bool rewrite) {
  auto writer = rewrite ? std::make_unique<ContainerWriter>(path, plan, ContainerWriter::Rewrite{})
                        // One dataset per tensor: the chunk owners are attributes of each.
                        : std::make_unique<ContainerWriter>(path, MPI_COMM_NULL, plan, /*pack_max_bytes=*/-1);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const auto& b = blocks[i];
    if (b.bytes > 0) writer->write_block(b.tensor, plan.tensors[b.tensor].chunks[b.chunk].chunk, data(i));
  }
  std::set<int> value_writers;
  for (const auto& v : plan.values) value_writers.insert(v.writer);
  for (const int w : value_writers) writer->write_values(w);
  writer->write_checksums(checksums);
  if (rewrite) {
    rewrite_local_step(writer->root(), identity.step);
  } else {
    write_local_identity(writer->root(), identity);
    for (std::size_t t = 0; t < plan.tensors.size(); ++t) {
      std::vector<std::int64_t> owners;
      for (const auto& c : plan.tensors[t].chunks) owners.push_back(c.writer);
      if (owners.empty()) owners.push_back(0);  // a 0-d tensor's one chunk
      write_chunk_owners(writer->tensor_dataset(t), owners);
    }
  }
  writer->close();
  fsync_file(path);
}

// Where each of `blocks` starts in the payload that packs their bytes in
// order; the last entry is the payload's size.
std::vector<std::size_t> packed_offsets(const std::vector<BlockWrite>& blocks) {
  std::vector<std::size_t> at{0};
  for (const auto& b : blocks) at.push_back(at.back() + static_cast<std::size_t>(b.bytes));
  return at;
}

// Throws IoError unless the blocks of `owner` received in `payload` are as
// long as the plan says and hash to the checksums the owner computed.
void check_received(const GlobalSavePlan& plan, int owner, const std::vector<BlockWrite>& blocks,
                    const std::vector<std::size_t>& at, const Bytes& payload, const Bytes& owner_checksums) {
  if (payload.size() != at.back())
    throw IoError("h5dcp: the copy of rank " + std::to_string(owner) + "'s blocks arrived with " +
                  std::to_string(payload.size()) + " bytes, not " + std::to_string(at.back()));
  const auto expected = decode_chunk_checksums(owner_checksums);
  std::size_t next = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].bytes == 0) continue;
    const auto got = checksum_block(blocks[i], payload.data() + at[i]);
    if (next >= expected.size() || expected[next].digests != got.digests)
      throw IoError("h5dcp: the copy of rank " + std::to_string(owner) + "'s block of '" +
                    plan.tensors[blocks[i].tensor].fqn + "' arrived damaged (its checksums differ)");
    ++next;
  }
}

}  // namespace

std::string local_copy_name(int owner) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.h5", owner);
  return name;
}

void stage_local_step(const Comm& c, const StateDict& state_dict, const SaveOptions& options,
                      const std::string& directory, StagedLocalStep& staged) {
  DefaultSavePlanner default_planner;
  SavePlanner& planner = options.planner != nullptr ? *options.planner : default_planner;
  StateDict expanded;
  const bool expand = has_stateful(state_dict);
  auto planned = plan_save(
      c, planner, expand ? expanded : state_dict, directory + "/" + local_copy_name(c.rank()),
      [&] {
        if (expand) expanded = expand_for_save(state_dict);
      },
      options.plan_cache);
  staged.plan = std::move(planned.plan);
  staged.plan_reused = planned.reused;
  if (!planned.reused) ++staged.layout;
  staged.mine = blocks_written_by(staged.plan, c.rank());
  staged.at = packed_offsets(staged.mine);
  // Copied (not aliased) even from host tensors: the caller may change them
  // as soon as this returns, while the rest of the step still runs. The
  // checksums too, here: every rank needs every rank's, and one step less
  // in the background is one wait less there, spent polling a core.
  staged.checksums = c.all_gather("local:stage", [&] {
    staged.packed.resize(staged.at.back());  // the same size as the last step's: no new memory
    std::vector<ChunkChecksums> sums;
    for (std::size_t i = 0; i < staged.mine.size(); ++i) {
      const auto& b = staged.mine[i];
      if (b.bytes == 0) continue;
      const auto& tensor = staged.plan.tensors[b.tensor];
      const auto bytes = host_bytes(resolve_block(planner, tensor, tensor.chunks[b.chunk]));
      char* copy = staged.packed.data() + staged.at[i];
      std::memcpy(copy, bytes.get(), static_cast<std::size_t>(b.bytes));
      sums.push_back(checksum_block(b, copy));
    }
    return encode(sums);
  });
}

SaveResult write_local_step(const Comm& c, StagedLocalStep& staged, const LocalStepTarget& target) {
  const auto& placement = *target.placement;
  const auto& plan = staged.plan;
  const auto& mine = staged.mine;
  const auto& checksums = staged.checksums;
  const auto all_checksums = assemble_checksums(plan, checksums);
  auto& received = staged.received;
  c.exchange_into(
      "local:copy",
      [&] {
        std::vector<std::string_view> out(static_cast<std::size_t>(c.size()));
        for (const int d : placement.destinations.at(static_cast<std::size_t>(c.rank())))
          out.at(static_cast<std::size_t>(d)) = staged.packed;
        return out;
      },
      received);
  c.all_gather("local:write", [&] {
    LocalFileIdentity identity{target.run_id, target.step, c.rank(), 0, placement.nodes, {}};
    for (const int n : placement.node_of_rank) identity.rank_node.push_back(n);
    auto write = [&](const std::vector<BlockWrite>& blocks, const std::vector<std::size_t>& at, const char* bytes) {
      const auto path = target.directory + "/" + local_copy_name(identity.owner_rank);
      write_copy(
          path, plan, all_checksums, identity, blocks,
          [&](std::size_t i) { return static_cast<const void*>(bytes + at[i]); }, rewritable(path, identity, staged));
    };
    write(mine, staged.at, staged.packed.data());
    for (const auto& source : placement.sources.at(static_cast<std::size_t>(c.rank()))) {
      const auto theirs = blocks_written_by(plan, source.rank);
      const auto at = packed_offsets(theirs);
      const auto& payload = received.at(static_cast<std::size_t>(source.rank));
      check_received(plan, source.rank, theirs, at, payload, checksums.at(static_cast<std::size_t>(source.rank)));
      identity.owner_rank = source.rank;
      identity.replica = source.replica + 1;
      write(theirs, at, payload.data());
    }
    return Bytes();
  });
  staged.layout_of_step[target.step] = staged.layout;
  while (staged.layout_of_step.size() > kLayoutsKept) staged.layout_of_step.erase(staged.layout_of_step.begin());
  return save_result_of(plan, staged.plan_reused);
}

}  // namespace h5dcp::detail
