// OptimizerState: LibTorch optimizers' per-parameter state and param groups
// as a state dict keyed by parameter fqn.

#include <ATen/ops/empty.h>
#include <c10/util/string_utils.h>
#include <torch/nn/module.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>
#include <set>

#include "h5dcp/error.hpp"
#include "h5dcp/optimizer.hpp"
#include "torch/dtype_mapping.hpp"
#include "torch/state_from_metadata.hpp"

namespace h5dcp {
namespace {

namespace optim = torch::optim;

// How LibTorch's optimizers key their state: by the parameter's TensorImpl.
void* state_key(const at::Tensor& parameter) { return parameter.unsafeGetTensorImpl(); }

enum class Kind { Sgd, Adam, AdamW, Adagrad, RmsProp };

Kind kind_of(optim::Optimizer& optimizer) {
  if (dynamic_cast<optim::SGD*>(&optimizer)) return Kind::Sgd;
  if (dynamic_cast<optim::Adam*>(&optimizer)) return Kind::Adam;
  if (dynamic_cast<optim::AdamW*>(&optimizer)) return Kind::AdamW;
  if (dynamic_cast<optim::Adagrad*>(&optimizer)) return Kind::Adagrad;
  if (dynamic_cast<optim::RMSprop*>(&optimizer)) return Kind::RmsProp;
  throw UsageError("h5dcp: OptimizerState supports SGD, Adam, AdamW, Adagrad and RMSprop");
}

// --- per-parameter state ----------------------------------------------------

struct ParamStateView {
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // defined ones only
  std::optional<std::int64_t> step;
};

template <typename State>
const State& as(const optim::OptimizerParamState& state) {
  return static_cast<const State&>(state);
}

ParamStateView view_of(Kind kind, const optim::OptimizerParamState& state) {
  ParamStateView v;
  auto add = [&](const char* name, const at::Tensor& t) {
    if (t.defined()) v.tensors.emplace_back(name, t);
  };
  switch (kind) {
    case Kind::Sgd: add("momentum_buffer", as<optim::SGDParamState>(state).momentum_buffer()); break;
    case Kind::Adam: {
      const auto& s = as<optim::AdamParamState>(state);
      add("exp_avg", s.exp_avg());
      add("exp_avg_sq", s.exp_avg_sq());
      add("max_exp_avg_sq", s.max_exp_avg_sq());
      v.step = s.step();
      break;
    }
    case Kind::AdamW: {
      const auto& s = as<optim::AdamWParamState>(state);
      add("exp_avg", s.exp_avg());
      add("exp_avg_sq", s.exp_avg_sq());
      add("max_exp_avg_sq", s.max_exp_avg_sq());
      v.step = s.step();
      break;
    }
    case Kind::Adagrad: {
      const auto& s = as<optim::AdagradParamState>(state);
      add("sum", s.sum());
      v.step = s.step();
      break;
    }
    case Kind::RmsProp: {
      const auto& s = as<optim::RMSpropParamState>(state);
      add("square_avg", s.square_avg());
      add("momentum_buffer", s.momentum_buffer());
      add("grad_avg", s.grad_avg());
      v.step = s.step();
      break;
    }
  }
  return v;
}

// The tensor of a loaded entry for this rank, checked against the parameter.
at::Tensor local_state_tensor(const StateValue& value, const at::Tensor& parameter, const std::string& where) {
  at::Tensor t;
  if (const auto* plain = std::get_if<at::Tensor>(&value)) {
    t = *plain;
  } else if (const auto* sharded = std::get_if<ShardedTensor>(&value)) {
    if (sharded->local_shards().size() != 1)
      throw UsageError("h5dcp: " + where + " has " + std::to_string(sharded->local_shards().size()) +
                       " local shards; optimizer state takes exactly one");
    t = sharded->local_shards().front().tensor;
  } else {
    throw UsageError("h5dcp: " + where + " is not a tensor");
  }
  if (!t.sizes().equals(parameter.sizes()))
    throw UsageError("h5dcp: " + where + " has shape " + c10::str(t.sizes()) + " but its parameter " +
                     c10::str(parameter.sizes()));
  return t.device() == parameter.device() ? t : t.to(parameter.device());
}

std::int64_t int_of(const StateDict& dict, const std::string& key, const std::string& where) {
  const auto it = dict.find(key);
  if (it == dict.end() || !std::holds_alternative<std::int64_t>(it->second))
    throw UsageError("h5dcp: " + where + " has no integer '" + key + "'");
  return std::get<std::int64_t>(it->second);
}

std::unique_ptr<optim::OptimizerParamState> make_param_state(Kind kind, const StateDict& entry,
                                                             const at::Tensor& parameter, const std::string& where) {
  auto tensor = [&](const char* name, bool required) -> at::Tensor {
    const auto it = entry.find(name);
    if (it == entry.end()) {
      if (required) throw UsageError("h5dcp: " + where + " has no '" + name + "'");
      return {};
    }
    return local_state_tensor(it->second, parameter, where + "/" + name);
  };
  switch (kind) {
    case Kind::Sgd: {
      auto s = std::make_unique<optim::SGDParamState>();
      s->momentum_buffer(tensor("momentum_buffer", false));
      return s;
    }
    case Kind::Adam: {
      auto s = std::make_unique<optim::AdamParamState>();
      s->step(int_of(entry, "step", where));
      s->exp_avg(tensor("exp_avg", true));
      s->exp_avg_sq(tensor("exp_avg_sq", true));
      s->max_exp_avg_sq(tensor("max_exp_avg_sq", false));
      return s;
    }
    case Kind::AdamW: {
      auto s = std::make_unique<optim::AdamWParamState>();
      s->step(int_of(entry, "step", where));
      s->exp_avg(tensor("exp_avg", true));
      s->exp_avg_sq(tensor("exp_avg_sq", true));
      s->max_exp_avg_sq(tensor("max_exp_avg_sq", false));
      return s;
    }
    case Kind::Adagrad: {
      auto s = std::make_unique<optim::AdagradParamState>();
      s->step(int_of(entry, "step", where));
      s->sum(tensor("sum", true));
      return s;
    }
    case Kind::RmsProp: {
      auto s = std::make_unique<optim::RMSpropParamState>();
      s->step(int_of(entry, "step", where));
      s->square_avg(tensor("square_avg", true));
      s->momentum_buffer(tensor("momentum_buffer", false));
      s->grad_avg(tensor("grad_avg", false));
      return s;
    }
  }
  throw UsageError("h5dcp: unknown optimizer kind");
}

// --- param group options ----------------------------------------------------

double double_of(const StateDict& group, const std::string& key, const std::string& where) {
  const auto it = group.find(key);
  if (it == group.end() || !std::holds_alternative<double>(it->second))
    throw UsageError("h5dcp: " + where + " has no number '" + key + "'");
  return std::get<double>(it->second);
}

bool bool_of(const StateDict& group, const std::string& key, const std::string& where) {
  const auto it = group.find(key);
  if (it == group.end() || !std::holds_alternative<bool>(it->second))
    throw UsageError("h5dcp: " + where + " has no bool '" + key + "'");
  return std::get<bool>(it->second);
}

StateList betas_list(const std::tuple<double, double>& betas) {
  return StateList{std::get<0>(betas), std::get<1>(betas)};
}

std::tuple<double, double> betas_of(const StateDict& group, const std::string& where) {
  const auto it = group.find("betas");
  const auto* list = it == group.end() ? nullptr : std::get_if<StateList>(&it->second);
  if (list == nullptr || list->size() != 2 || !std::holds_alternative<double>((*list)[0]) ||
      !std::holds_alternative<double>((*list)[1]))
    throw UsageError("h5dcp: " + where + " has no 'betas' pair");
  return {std::get<double>((*list)[0]), std::get<double>((*list)[1])};
}

StateDict options_dict(Kind kind, const optim::OptimizerOptions& options) {
  switch (kind) {
    case Kind::Sgd: {
      const auto& o = static_cast<const optim::SGDOptions&>(options);
      return {{"lr", o.lr()},
              {"momentum", o.momentum()},
              {"dampening", o.dampening()},
              {"weight_decay", o.weight_decay()},
              {"nesterov", o.nesterov()}};
    }
    case Kind::Adam: {
      const auto& o = static_cast<const optim::AdamOptions&>(options);
      return {{"lr", o.lr()},
              {"betas", betas_list(o.betas())},
              {"eps", o.eps()},
              {"weight_decay", o.weight_decay()},
              {"amsgrad", o.amsgrad()}};
    }
    case Kind::AdamW: {
      const auto& o = static_cast<const optim::AdamWOptions&>(options);
      return {{"lr", o.lr()},
              {"betas", betas_list(o.betas())},
              {"eps", o.eps()},
              {"weight_decay", o.weight_decay()},
              {"amsgrad", o.amsgrad()}};
    }
    case Kind::Adagrad: {
      const auto& o = static_cast<const optim::AdagradOptions&>(options);
      return {{"lr", o.lr()},
              {"lr_decay", o.lr_decay()},
              {"weight_decay", o.weight_decay()},
              {"initial_accumulator_value", o.initial_accumulator_value()},
              {"eps", o.eps()}};
    }
    case Kind::RmsProp: {
      const auto& o = static_cast<const optim::RMSpropOptions&>(options);
      return {{"lr", o.lr()},
              {"alpha", o.alpha()},
              {"eps", o.eps()},
              {"weight_decay", o.weight_decay()},
              {"momentum", o.momentum()},
              {"centered", o.centered()}};
    }
  }
  return {};
}

void apply_options(Kind kind, optim::OptimizerOptions& options, const StateDict& g, const std::string& where) {
  switch (kind) {
    case Kind::Sgd: {
      auto& o = static_cast<optim::SGDOptions&>(options);
      o.lr(double_of(g, "lr", where)).momentum(double_of(g, "momentum", where));
      o.dampening(double_of(g, "dampening", where)).weight_decay(double_of(g, "weight_decay", where));
      o.nesterov(bool_of(g, "nesterov", where));
      return;
    }
    case Kind::Adam: {
      auto& o = static_cast<optim::AdamOptions&>(options);
      o.lr(double_of(g, "lr", where)).betas(betas_of(g, where)).eps(double_of(g, "eps", where));
      o.weight_decay(double_of(g, "weight_decay", where)).amsgrad(bool_of(g, "amsgrad", where));
      return;
    }
    case Kind::AdamW: {
      auto& o = static_cast<optim::AdamWOptions&>(options);
      o.lr(double_of(g, "lr", where)).betas(betas_of(g, where)).eps(double_of(g, "eps", where));
      o.weight_decay(double_of(g, "weight_decay", where)).amsgrad(bool_of(g, "amsgrad", where));
      return;
    }
    case Kind::Adagrad: {
      auto& o = static_cast<optim::AdagradOptions&>(options);
      o.lr(double_of(g, "lr", where)).lr_decay(double_of(g, "lr_decay", where));
      o.weight_decay(double_of(g, "weight_decay", where));
      o.initial_accumulator_value(double_of(g, "initial_accumulator_value", where)).eps(double_of(g, "eps", where));
      return;
    }
    case Kind::RmsProp: {
      auto& o = static_cast<optim::RMSpropOptions&>(options);
      o.lr(double_of(g, "lr", where)).alpha(double_of(g, "alpha", where)).eps(double_of(g, "eps", where));
      o.weight_decay(double_of(g, "weight_decay", where)).momentum(double_of(g, "momentum", where));
      o.centered(bool_of(g, "centered", where));
      return;
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> named_parameters(torch::nn::Module& module) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) out.emplace_back(p.key(), p.value());
  return out;
}

OptimizerState::OptimizerState(std::shared_ptr<optim::Optimizer> optimizer,
                               std::vector<std::pair<std::string, at::Tensor>> parameters,
                               std::map<std::string, BlockLayout> layouts)
    : optimizer_(std::move(optimizer)), parameters_(std::move(parameters)), layouts_(std::move(layouts)) {
  if (!optimizer_) throw UsageError("h5dcp: OptimizerState needs an optimizer");
  kind_of(*optimizer_);
  std::set<const void*> named;
  for (const auto& [fqn, p] : parameters_) named.insert(p.unsafeGetTensorImpl());
  for (const auto& group : optimizer_->param_groups())
    for (const auto& p : group.params())
      if (named.count(p.unsafeGetTensorImpl()) == 0)
        throw UsageError("h5dcp: the optimizer holds a parameter of shape " + c10::str(p.sizes()) +
                         " that OptimizerState was given no name for");
}

StateDict OptimizerState::state_dict() {
  const auto kind = kind_of(*optimizer_);
  std::map<const void*, std::string> name_of;
  for (const auto& [fqn, p] : parameters_) name_of[p.unsafeGetTensorImpl()] = fqn;

  StateDict per_param;
  auto& state = optimizer_->state();
  for (const auto& [fqn, p] : parameters_) {
    const auto it = state.find(state_key(p));
    if (it == state.end()) continue;  // no step taken for it yet
    const auto view = view_of(kind, *it->second);
    StateDict entry;
    const auto layout = layouts_.find(fqn);
    for (const auto& [name, t] : view.tensors) {
      if (layout != layouts_.end() && t.sizes().equals(p.sizes()))
        entry[name] = ShardedTensor(layout->second.global_shape, {Shard{t, layout->second.offsets}});
      else
        entry[name] = t;
    }
    if (view.step) entry["step"] = *view.step;
    per_param[fqn] = std::move(entry);
  }

  StateList groups;
  for (const auto& group : optimizer_->param_groups()) {
    StateDict g = options_dict(kind, group.options());
    StateList names;
    for (const auto& p : group.params()) names.emplace_back(name_of.at(p.unsafeGetTensorImpl()));
    g["params"] = std::move(names);
    groups.emplace_back(std::move(g));
  }
  return StateDict{{"state", std::move(per_param)}, {"param_groups", std::move(groups)}};
}

StateDict OptimizerState::state_dict_for_load(const Metadata& metadata, const std::string& fqn) {
  std::map<std::string, at::Tensor> mine(parameters_.begin(), parameters_.end());
  auto state = detail::state_from_metadata(metadata, fqn, [&](const std::string& rel, const TensorStorageMetadata& t) {
    const auto options = at::TensorOptions().dtype(detail::to_scalar_type(t.properties.dtype));
    const auto path = path_of(rel);  // "state", parameter, name
    const auto param = path.size() == 3 && path[0] == "state" ? mine.find(path[1]) : mine.end();
    if (param != mine.end()) {
      const auto layout = layouts_.find(path[1]);
      if (layout != layouts_.end() && t.size == layout->second.global_shape)
        return StateValue(ShardedTensor(layout->second.global_shape,
                                        {Shard{at::empty(param->second.sizes(), options), layout->second.offsets}}));
    }
    return StateValue(at::empty(t.size, options));
  });
  // Only the state of this optimizer's parameters (others may be elsewhere).
  if (auto it = state.find("state"); it != state.end())
    if (auto* per_param = std::get_if<StateDict>(&it->second))
      for (auto p = per_param->begin(); p != per_param->end();)
        p = mine.count(p->first) ? std::next(p) : per_param->erase(p);
  return state;
}

void OptimizerState::load_state_dict(const StateDict& state) {
  const auto kind = kind_of(*optimizer_);
  std::map<std::string, at::Tensor> by_name(parameters_.begin(), parameters_.end());
  std::map<const void*, std::string> name_of;
  for (const auto& [fqn, p] : parameters_) name_of[p.unsafeGetTensorImpl()] = fqn;

  const auto groups_it = state.find("param_groups");
  const auto* groups = groups_it == state.end() ? nullptr : std::get_if<StateList>(&groups_it->second);
  if (groups == nullptr) throw UsageError("h5dcp: the optimizer state has no 'param_groups' list");
  auto& own_groups = optimizer_->param_groups();
  if (groups->size() != own_groups.size())
    throw UsageError("h5dcp: the optimizer state has " + std::to_string(groups->size()) +
                     " param groups, the optimizer " + std::to_string(own_groups.size()));
  for (std::size_t i = 0; i < groups->size(); ++i) {
    const std::string where = "param group " + std::to_string(i);
    const auto* g = std::get_if<StateDict>(&(*groups)[i]);
    if (g == nullptr) throw UsageError("h5dcp: " + where + " is not a dict");
    std::vector<std::string> saved_names;
    if (const auto it = g->find("params"); it != g->end())
      if (const auto* names = std::get_if<StateList>(&it->second))
        for (const auto& n : *names)
          if (const auto* s = std::get_if<std::string>(&n)) saved_names.push_back(*s);
    std::vector<std::string> own_names;
    for (const auto& p : own_groups[i].params()) own_names.push_back(name_of.at(p.unsafeGetTensorImpl()));
    if (saved_names != own_names)
      throw UsageError("h5dcp: " + where + " holds other parameters in the checkpoint than in the optimizer");
    apply_options(kind, own_groups[i].options(), *g, where);
  }

  auto& own_state = optimizer_->state();
  if (const auto it = state.find("state"); it != state.end()) {
    const auto* per_param = std::get_if<StateDict>(&it->second);
    if (per_param == nullptr) throw UsageError("h5dcp: the optimizer state's 'state' is not a dict");
    for (const auto& [fqn, value] : *per_param) {
      const auto param = by_name.find(fqn);
      if (param == by_name.end())
        throw UsageError("h5dcp: the optimizer state has state for unknown parameter '" + fqn + "'");
      const auto* entry = std::get_if<StateDict>(&value);
      if (entry == nullptr) throw UsageError("h5dcp: the state of '" + fqn + "' is not a dict");
      own_state[state_key(param->second)] = make_param_state(kind, *entry, param->second, "the state of '" + fqn + "'");
    }
  }
}

}  // namespace h5dcp
