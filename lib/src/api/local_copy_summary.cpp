// read_local_copy_summary: what a node-local tier's copy holds (h5dcp/verify.hpp).

#include "api/local_copy_summary.hpp"

#include <variant>

#include "h5dcp/error.hpp"
#include "h5dcp/verify.hpp"
#include "hdf5/container_reader.hpp"
#include "hdf5/hdf5_access.hpp"
#include "hdf5/local_file.hpp"

namespace h5dcp {
namespace detail {

std::optional<LocalCopySummary> local_copy_summary(const std::string& path, const Metadata& metadata,
                                                   std::map<std::string, std::vector<std::int64_t>>* owners_out) {
  if (!is_local_copy(path)) return std::nullopt;
  const auto id = read_local_identity(path);
  auto owners = read_chunk_owners(path, metadata, static_cast<std::int64_t>(id.rank_node.size()));
  LocalCopySummary s{id.run_id, id.step, id.owner_rank, id.replica, id.nodes, id.rank_node, 0, 0};
  for (const auto& [fqn, chunk_owners] : owners)
    for (const auto o : chunk_owners) {
      ++s.chunks_total;
      if (o == id.owner_rank) ++s.chunks_held;
    }
  if (owners_out != nullptr) *owners_out = std::move(owners);
  return s;
}

}  // namespace detail

std::optional<LocalCopySummary> read_local_copy_summary(const std::string& path) {
  detail::Hdf5Access access;  // HDF5 is not thread-safe: see hdf5/hdf5_gate.hpp
  const auto index = detail::read_container_index(path, /*require_exact_tiling=*/false);
  return detail::local_copy_summary(path, index.metadata, nullptr);
}

}  // namespace h5dcp
