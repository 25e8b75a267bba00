// The torch::nn::Module overloads of h5dcp/training/module_sync.hpp: a module's named
// parameters and buffers, handed to the tensor versions. The only file of
// these utilities that pays for <torch/nn/module.h>.

#include <torch/nn/module.h>

#include "training/module_sync_internal.hpp"

namespace h5dcp {
namespace {

void append(NamedTensors& out, const torch::OrderedDict<std::string, at::Tensor>& tensors,
            const std::set<std::string>& ignore) {
  for (const auto& item : tensors)
    if (item.value().defined() && ignore.count(item.key()) == 0) out.emplace_back(item.key(), item.value());
}

}  // namespace

ModuleSyncResult sync_module_states(const torch::nn::Module& module, const SyncModuleOptions& options, MPI_Comm comm) {
  NamedTensors states;
  append(states, module.named_parameters(/*recurse=*/true), options.ignore);
  if (options.broadcast_buffers) append(states, module.named_buffers(/*recurse=*/true), options.ignore);
  ModuleSyncResult result;
  result.buckets = detail::broadcast_named(states, options.bucket_bytes, options.src, comm);
  for (auto& [name, tensor] : states) result.names.push_back(std::move(name));
  return result;
}

void verify_param_shapes_across_ranks(const torch::nn::Module& module, MPI_Comm comm) {
  NamedTensors params;
  append(params, module.named_parameters(/*recurse=*/true), {});
  verify_param_shapes_across_ranks(params, comm);
}

}  // namespace h5dcp
