// load_safetensors(): safetensors onto N ranks, each reading its own blocks.
//
//   load:metadata  broadcast   the coordinator reads and checks the headers and shares their index
//   load:open      all_gather  every rank opens the files (the same files: sizes checked)
//   load:read      all_gather  each rank plans its reads against the index (like load()), reads
//                              its blocks straight from the files and commits them

#include <ATen/core/Tensor.h>

#include <optional>

#include "api/checkpoint_session.hpp"
#include "comm/comm.hpp"
#include "formats/safetensors_index.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/planner.hpp"
#include "h5dcp/safetensors.hpp"
#include "interop/shared/source_files.hpp"
#include "torch/tensor_blocks.hpp"
#include "torch/value_codec.hpp"

namespace h5dcp {

LoadResult load_safetensors(StateDict& state_dict, const std::string& path, const LoadOptions& options, MPI_Comm comm) {
  detail::Comm c(comm, options.coordinator);
  c.require_same("safetensors paths", path);
  c.set_timeout(detail::resolve_timeout(options.timeout_seconds));
  const auto index = detail::decode_torch_save_index(
      c.broadcast("load:metadata", [&] { return detail::encode(detail::safetensors_index(path)); }));
  const auto metadata = detail::metadata_of(index);
  std::optional<detail::SourceFiles> files;
  c.all_gather("load:open", [&] {
    files.emplace(path, index);
    return detail::Bytes();
  });
  DefaultLoadPlanner default_planner(options.strict, options.convert_dtype);
  LoadPlanner& planner = options.planner != nullptr ? *options.planner : default_planner;
  std::optional<LoadPlan> plan;
  c.all_gather("load:read", [&] {
    planner.set_up(state_dict, metadata, c.is_coordinator());
    plan = planner.create_local_plan();
    for (const auto& item : plan->items) {
      if (item.type != ReadItemType::Tensor) {
        const auto& v = index.values.at(item.storage_fqn);
        planner.load_value(item, detail::decode_value(v.encoding, v.payload, item.storage_fqn));
        continue;
      }
      const auto dest = planner.resolve_tensor(item);
      const auto& tensor = index.tensors.at(item.storage_fqn);
      const auto& storage = index.storages.at(tensor.storage);
      detail::dest_block(dest, item)
          .copy_(detail::read_block(files->of(storage), storage, tensor,
                                    ChunkStorageMetadata{item.storage_offsets, item.lengths}));
      planner.commit_tensor(item, dest);
    }
    return detail::Bytes();
  });
  return LoadResult{plan->missing, plan->unexpected};
}

}  // namespace h5dcp
