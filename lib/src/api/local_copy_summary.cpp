// read_local_copy_summary: what a node-local tier's copy holds (h5dcp/verify.hpp).

#include "api/local_copy_summary.hpp"

#include "hdf5/hdf5_access.hpp"

namespace h5dcp {
namespace detail {

LocalCopySummary summarize_local_copy(const LocalFileIdentity& id, const ChunkOwners& owners) {
  LocalCopySummary s{id.run_id, id.step, id.owner_rank, id.replica, id.nodes, id.rank_node, 0, 0};
  for (const auto& [fqn, chunk_owners] : owners)
    for (const auto o : chunk_owners) {
      ++s.chunks_total;
      if (o == id.owner_rank) ++s.chunks_held;
    }
  return s;
}

}  // namespace detail

std::optional<LocalCopySummary> read_local_copy_summary(const std::string& path) {
  detail::Hdf5Access access;  // HDF5 is not thread-safe: see hdf5/hdf5_gate.hpp
  const auto file = detail::read_checkpoint_file_index(path, /*require_exact_tiling=*/false);
  if (!file.local) return std::nullopt;
  return detail::summarize_local_copy(*file.local, file.owners);
}

}  // namespace h5dcp
