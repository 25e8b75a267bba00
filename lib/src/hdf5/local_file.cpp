#include "hdf5/local_file.hpp"

#include <hdf5.h>

#include <algorithm>
#include <variant>

#include "h5dcp/error.hpp"
#include "hdf5/attributes.hpp"
#include "hdf5/container_layout.hpp"
#include "hdf5/hdf5_error.hpp"
#include "hdf5/hdf5_file.hpp"
#include "plan/chunk_geometry.hpp"

namespace h5dcp::detail {
namespace {

std::string joined_lines(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) {
    if (!out.empty()) out += '\n';
    out += n;
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (auto at = text.find('\n'); at != std::string::npos; at = text.find('\n', from)) {
    out.push_back(text.substr(from, at - from));
    from = at + 1;
  }
  out.push_back(text.substr(from));
  return out;
}

std::int64_t single(const std::vector<std::int64_t>& values, const char* name, const std::string& where) {
  if (values.size() != 1)
    throw FormatError("h5dcp: attribute '" + std::string(name) + "' of " + where + " must hold one integer");
  return values[0];
}

// The chunk owners of every tensor of `metadata` in the copy open at `root`
// (read_local_copy_index).
ChunkOwners chunk_owners_in(Hid root, const Metadata& metadata, std::int64_t world_size) {
  ChunkOwners out;
  for (const auto& [fqn, storage] : metadata.state_dict_metadata) {
    const auto* tensor = std::get_if<TensorStorageMetadata>(&storage);
    if (tensor == nullptr) continue;
    const std::string where = "the dataset of '" + fqn + "'";
    const auto name = "/" + fqn;
    const Handle dataset(check_id(H5Dopen2(root, name.c_str(), H5P_DEFAULT), "opening " + where), H5Dclose);
    auto owners = read_int64_attribute(dataset.get(), layout::kLocalChunkOwners, where);
    const auto chunks = std::max<std::size_t>(tensor->chunks.size(), 1);
    if (owners.size() != chunks)
      throw FormatError("h5dcp: " + where + " names the owners of " + std::to_string(owners.size()) +
                        " chunks, not of its " + std::to_string(chunks));
    for (const auto o : owners)
      if (o < 0 || o >= world_size)
        throw FormatError("h5dcp: " + where + " names rank " + std::to_string(o) + " of a job of " +
                          std::to_string(world_size) + " ranks as a chunk's owner");
    out.emplace(fqn, std::move(owners));
  }
  return out;
}

// The identity of the local copy open at `root` (read_local_identity).
LocalFileIdentity local_identity_in(Hid root, const std::string& path) {
  const std::string where = "'" + path + "'";
  if (!has_attribute(root, layout::kLocalRunId))
    throw FormatError("h5dcp: " + where + " is not a node-local copy (no " + layout::kLocalRunId + ")");
  LocalFileIdentity id;
  id.run_id = read_string_attribute(root, layout::kLocalRunId, where);
  id.step = single(read_int64_attribute(root, layout::kLocalStep, where), layout::kLocalStep, where);
  // Checked as stored, before narrowing to int: 2^32 must not read as rank 0.
  const auto owner = single(read_int64_attribute(root, layout::kLocalOwnerRank, where), layout::kLocalOwnerRank, where);
  const auto replica = single(read_int64_attribute(root, layout::kLocalReplica, where), layout::kLocalReplica, where);
  id.nodes = split_lines(read_string_attribute(root, layout::kLocalNodes, where));
  id.rank_node = read_int64_attribute(root, layout::kLocalRankNode, where);
  const auto ranks = static_cast<std::int64_t>(id.rank_node.size());
  if (owner < 0 || owner >= ranks || replica < 0 || replica >= ranks)
    throw FormatError("h5dcp: " + where + ": its owner rank " + std::to_string(owner) + " or replica " +
                      std::to_string(replica) + " is outside the saving job of " + std::to_string(ranks) + " ranks");
  id.owner_rank = static_cast<int>(owner);
  id.replica = static_cast<int>(replica);
  for (const auto n : id.rank_node)
    if (n < 0 || static_cast<std::size_t>(n) >= id.nodes.size())
      throw FormatError("h5dcp: " + where + ": a rank's node " + std::to_string(n) + " is not one of its " +
                        std::to_string(id.nodes.size()) + " nodes");
  return id;
}

}  // namespace

void write_local_identity(Hid root, const LocalFileIdentity& identity) {
  write_string_attribute(root, layout::kLocalRunId, identity.run_id);
  write_int64_attribute(root, layout::kLocalStep, {identity.step});
  write_int64_attribute(root, layout::kLocalOwnerRank, {identity.owner_rank});
  write_int64_attribute(root, layout::kLocalReplica, {identity.replica});
  write_string_attribute(root, layout::kLocalNodes, joined_lines(identity.nodes));
  write_int64_attribute(root, layout::kLocalRankNode, identity.rank_node);
}

void rewrite_local_step(Hid root, std::int64_t step) { overwrite_int64_attribute(root, layout::kLocalStep, {step}); }

void write_chunk_owners(Hid dataset, const std::vector<std::int64_t>& owners) {
  write_int64_attribute(dataset, layout::kLocalChunkOwners, owners);
}

LocalCopyIndex read_local_copy_index(const std::string& path, std::int64_t world_size) {
  auto file = open_file_read_only(path, MPI_COMM_NULL);
  LocalCopyIndex out;
  out.index = read_container_index(file.get(), path);
  out.owners = chunk_owners_in(file.get(), out.index.metadata, world_size);
  // Every copy holds the checksums of every tensor with elements
  // (write_copy): a recovery uses no block it cannot verify, and a copy
  // without them is judged here, where a replica can be chosen instead.
  for (const auto& [fqn, storage] : out.index.metadata.state_dict_metadata) {
    const auto* tensor = std::get_if<TensorStorageMetadata>(&storage);
    if (tensor != nullptr && checked_volume(tensor->size).value_or(0) != 0 && out.index.checksums.count(fqn) == 0)
      throw FormatError(std::string("h5dcp: '").append(path).append("' holds no checksums for '").append(fqn) + "'");
  }
  file.close("'" + path + "'");
  return out;
}

LocalFileIdentity read_local_identity(const std::string& path) {
  const auto file = open_file_read_only(path, MPI_COMM_NULL);
  return local_identity_in(file.get(), path);
}

CheckpointFileIndex read_checkpoint_file_index(const std::string& path, bool require_exact_tiling) {
  auto file = open_file_read_only(path, MPI_COMM_NULL);
  CheckpointFileIndex out;
  out.index = read_container_index(file.get(), path, require_exact_tiling);
  if (has_attribute(file.get(), layout::kLocalRunId)) {
    out.local = local_identity_in(file.get(), path);
    out.owners =
        chunk_owners_in(file.get(), out.index.metadata, static_cast<std::int64_t>(out.local->rank_node.size()));
  }
  file.close("'" + path + "'");
  return out;
}

}  // namespace h5dcp::detail
