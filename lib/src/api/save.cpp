// save(): PyTorch DCP's two-phase protocol over MPI and one parallel HDF5 file
// (the phases are in api/save_steps.hpp).

#include <ATen/core/Tensor.h>

#include "api/checkpoint_session.hpp"
#include "api/save_steps.hpp"
#include "api/stateful_expansion.hpp"
#include "base/fault_injection.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/error.hpp"
#include "plan/block_writes.hpp"
#include "torch/host_bytes.hpp"

namespace h5dcp {

SaveResult save(const StateDict& state_dict, const std::string& path, const SaveOptions& options, MPI_Comm comm) {
  detail::CheckpointSession session(comm, options.coordinator, "save", path, options.timeout_seconds,
                                    detail::save_settings(options));
  session.require_directory_everywhere();  // every rank creates the file (collectively)
  const auto& c = session.comm();
  DefaultSavePlanner default_planner;
  SavePlanner& planner = options.planner != nullptr ? *options.planner : default_planner;
  // Stateful objects are saved as their state dicts; asking them is part of
  // planning, so a throw there fails the save on every rank.
  StateDict expanded;
  const bool expand = detail::has_stateful(state_dict);
  const auto planned = detail::plan_save(
      c, planner, expand ? expanded : state_dict, path,
      [&] {
        if (expand) expanded = detail::expand_for_save(state_dict);
      },
      options.plan_cache);
  const auto& plan = planned.plan;
  detail::write_and_publish(c, plan, path, [&](detail::ContainerWriter& writer) {
    std::vector<detail::ChunkChecksums> checksums;
    writer.write(c.rank(), options.io_mode, [&](const PlannedTensor& tensor, const PlannedChunk& chunk) {
      // A failure while resolving a block: the writer keeps taking part in
      // the collective writes and reports it at the end of the step.
      detail::fault_point("save:block", c.rank());
      auto bytes = detail::host_bytes(detail::resolve_block(planner, tensor, chunk));
      // Checksummed now, from the bytes about to be written, in the slabs
      // the plan cuts the block into.
      const auto t = static_cast<std::size_t>(&tensor - plan.tensors.data());
      const auto k = static_cast<std::size_t>(&chunk - tensor.chunks.data());
      checksums.push_back(detail::checksum_block(detail::block_write(plan, t, k), bytes.get()));
      return bytes;
    });
    return checksums;
  });
  return detail::save_result_of(plan, planned.reused);
}

}  // namespace h5dcp
