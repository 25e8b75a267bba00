// load_sharded_optimizer_state_dict: optimizer state allocated from the
// checkpoint's metadata and sharded like the model (PyTorch DCP's optimizer.py).

#include <ATen/ops/empty.h>

#include "comm/comm.hpp"
#include "comm/plain_calls.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/optimizer.hpp"
#include "h5dcp/planner.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/empty_tensors.hpp"
#include "torch/state_from_metadata.hpp"

namespace h5dcp {

StateDict load_sharded_optimizer_state_dict(const StateDict& model_state_dict, const std::string& optimizer_key,
                                            const std::string& path, MPI_Comm dp_comm, const LoadOptions& options,
                                            MPI_Comm comm) {
  const auto metadata = read_metadata(path, {options.coordinator, options.timeout_seconds}, comm);
  const int rank = detail::rank_of(comm);
  const int world = detail::size_of(comm);
  const int dp_rank = detail::rank_of(dp_comm);
  const int dp_world = detail::size_of(dp_comm);  // 1 for MPI_COMM_NULL

  // fqn (in the file) -> where this rank's tensor-parallel block starts.
  std::map<std::string, Shape> translations;
  std::string problem;
  auto state =
      detail::state_from_metadata(metadata, optimizer_key, [&](const std::string& rel, const TensorStorageMetadata& t) {
        const auto tensor_options = at::TensorOptions().dtype(detail::to_scalar_type(t.properties.dtype));
        std::int64_t numel = 1;
        for (auto s : t.size) numel *= s;
        if (numel <= 1 || t.size.empty()) return StateValue(at::empty(t.size, tensor_options));  // scalars whole
        const auto path = path_of(rel);  // "state", parameter, name
        const auto model =
            path.size() == 3 && path[0] == "state" ? model_state_dict.find(path[1]) : model_state_dict.end();
        const auto* block = model == model_state_dict.end() ? nullptr : std::get_if<ShardedTensor>(&model->second);
        if (block == nullptr)
          return detail::empty_chunked_dim0(t.size, tensor_options, rank, world);  // replicated parameter: ZeRO-1
        if (block->local_shards().size() != 1) {
          problem = "the model's '" + path[1] + "' has " + std::to_string(block->local_shards().size()) +
                    " local shards; a tensor-parallel block is exactly one";
          return StateValue(std::monostate{});
        }
        const auto& shard = block->local_shards().front();
        const Shape block_shape(shard.tensor.sizes().begin(), shard.tensor.sizes().end());
        translations[optimizer_key + "/" + rel] = shard.offsets;
        return detail::empty_chunked_dim0(block_shape, tensor_options, dp_rank, dp_world);
      });
  if (!problem.empty()) throw UsageError("h5dcp: " + problem);

  // Load the subtree in place, reads translated by each block's offset.
  StateDict wrapper;
  StateValue* slot = nullptr;
  for (const auto& key : path_of(optimizer_key)) {
    auto& dict = slot == nullptr ? wrapper : std::get<StateDict>(*slot);
    slot = &dict.emplace(key, StateDict{}).first->second;
  }
  *slot = std::move(state);
  OffsetLoadPlanner planner(translations, options.strict, options.convert_dtype);
  LoadOptions with_planner = options;
  with_planner.planner = &planner;
  load(wrapper, path, with_planner, comm);
  return std::get<StateDict>(value_at(wrapper, optimizer_key));
}

}  // namespace h5dcp
