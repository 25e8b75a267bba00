#include <torch/nn/module.h>

#include "h5dcp/error.hpp"
#include "h5dcp/module.hpp"

namespace h5dcp {
namespace {

// The tensor a loaded value holds for this rank: a plain tensor, or the one
// local shard of a sharded one.
at::Tensor local_tensor(const StateValue& value, const std::string& key) {
  if (const auto* t = std::get_if<at::Tensor>(&value)) return *t;
  if (const auto* s = std::get_if<ShardedTensor>(&value)) {
    if (s->local_shards().size() != 1)
      throw UsageError("h5dcp: '" + key + "' has " + std::to_string(s->local_shards().size()) +
                       " local shards; a module tensor takes exactly one");
    return s->local_shards().front().tensor;
  }
  throw UsageError("h5dcp: '" + key + "' is not a tensor in the loaded module state");
}

}  // namespace

ModuleState::ModuleState(std::shared_ptr<torch::nn::Module> module, std::map<std::string, BlockLayout> layouts,
                         bool strict)
    : module_(std::move(module)), layouts_(std::move(layouts)), strict_(strict) {
  if (!module_) throw UsageError("h5dcp: ModuleState needs a module");
}

StateDict ModuleState::state_dict() {
  StateDict state;
  auto add = [&](const std::string& key, const at::Tensor& tensor) {
    const auto layout = layouts_.find(key);
    if (layout == layouts_.end())
      state[key] = tensor.detach();
    else
      state[key] = ShardedTensor(layout->second.global_shape, {Shard{tensor.detach(), layout->second.offsets}});
  };
  for (const auto& p : module_->named_parameters(/*recurse=*/true)) add(p.key(), p.value());
  for (const auto& b : module_->named_buffers(/*recurse=*/true)) add(b.key(), b.value());
  return state;
}

void ModuleState::load_state_dict(const StateDict& state) {
  std::map<std::string, at::Tensor> own;
  for (const auto& p : module_->named_parameters(true)) own[p.key()] = p.value();
  for (const auto& b : module_->named_buffers(true)) own[b.key()] = b.value();
  std::string missing;
  std::string unexpected;
  for (const auto& [key, tensor] : own)
    if (state.count(key) == 0) missing += (missing.empty() ? "'" : ", '") + key + "'";
  for (const auto& [key, value] : state)
    if (own.count(key) == 0) unexpected += (unexpected.empty() ? "'" : ", '") + key + "'";
  if (strict_ && (!missing.empty() || !unexpected.empty()))
    throw UsageError("h5dcp: the module state does not fit the module:" +
                     (missing.empty() ? std::string() : " missing " + missing + ";") +
                     (unexpected.empty() ? std::string() : " unexpected " + unexpected));
  for (const auto& [key, value] : state) {
    const auto it = own.find(key);
    if (it == own.end()) continue;
    const auto source = local_tensor(value, key);
    auto target = it->second.detach();
    if (!source.sizes().equals(target.sizes()) || source.scalar_type() != target.scalar_type())
      throw UsageError("h5dcp: '" + key + "' is " + std::string(c10::toString(source.scalar_type())) + " " +
                       c10::str(source.sizes()) + " in the state but " + c10::toString(target.scalar_type()) + " " +
                       c10::str(target.sizes()) + " in the module");
    if (!source.is_same(target) && source.data_ptr() != target.data_ptr()) target.copy_(source);
  }
}

}  // namespace h5dcp
