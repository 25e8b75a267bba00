// apply_to_tensors over state dicts and IValue nests, and the floating-point
// cast of forward inputs built on it.

#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include <string>
#include <utility>

#include "h5dcp/error.hpp"
#include "h5dcp/training/utils.hpp"
#include "torch/nested_apply.hpp"

namespace h5dcp {
namespace {

detail::PathTensorFn ignoring_path(const TensorFn& fn) {
  return [&fn](const at::Tensor& t, const detail::TensorPath&) { return fn(t); };
}

c10::IValue apply_ivalue(const c10::IValue& value, const TensorFn& fn) {
  if (value.isTensor()) {
    const auto& tensor = value.toTensor();
    return tensor.defined() ? c10::IValue(fn(tensor)) : value;
  }
  if (value.isTensorList()) {
    const auto list = value.toTensorList();
    c10::List<at::Tensor> out;
    out.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto& t = list.get(i);
      out.push_back(t.defined() ? fn(t) : t);
    }
    return out;
  }
  if (value.isList()) {
    const auto list = value.toList();
    c10::impl::GenericList out(list.elementType());
    out.reserve(list.size());
    for (std::size_t i = 0; i < list.size(); ++i) out.push_back(apply_ivalue(list.get(i), fn));
    return out;
  }
  if (value.isTuple()) {
    const auto& tuple = value.toTupleRef();
    std::vector<c10::IValue> elements;
    elements.reserve(tuple.size());
    for (const auto& element : tuple.elements()) elements.push_back(apply_ivalue(element, fn));
    // A named tuple keeps its type (names and schema); a plain one derives it.
    auto type = tuple.type();
    if (type->schema()) return c10::ivalue::Tuple::createNamed(std::move(elements), std::move(type));
    return c10::ivalue::Tuple::create(std::move(elements));
  }
  if (value.isGenericDict()) {
    const auto dict = value.toGenericDict();
    c10::impl::GenericDict out(dict.keyType(), dict.valueType());
    out.reserve(dict.size());
    for (const auto& entry : dict) out.insert(entry.key(), apply_ivalue(entry.value(), fn));
    return out;
  }
  if (value.isObject()) {
    // A shallow copy with its attributes replaced: torch.distributed.utils' dataclass case.
    auto object = value.toObjectRef().copy();
    for (std::size_t slot = 0; slot < object->slots().size(); ++slot)
      object->setSlot(slot, apply_ivalue(object->getSlot(slot), fn));
    return object;
  }
  return value;
}

void check_floating(at::ScalarType dtype) {
  if (!at::isFloatingType(dtype))
    throw UsageError(std::string("h5dcp: forward inputs can only be cast to a floating dtype, not ") +
                     c10::toString(dtype));
}

TensorFn caster(at::ScalarType dtype) {
  return [dtype](const at::Tensor& t) { return cast_if_floating(t, dtype); };
}

}  // namespace

at::Tensor apply_to_tensors(const at::Tensor& tensor, const TensorFn& fn) {
  return tensor.defined() ? fn(tensor) : tensor;
}

StateValue apply_to_tensors(const StateValue& value, const TensorFn& fn) {
  detail::TensorPath path;
  return detail::apply_to_tensors_at(value, path, ignoring_path(fn));
}

StateDict apply_to_tensors(const StateDict& state_dict, const TensorFn& fn) {
  detail::TensorPath path;
  return detail::apply_to_tensors_at(state_dict, path, ignoring_path(fn));
}

StateList apply_to_tensors(const StateList& list, const TensorFn& fn) {
  StateList out;
  out.reserve(list.size());
  for (const auto& value : list) out.push_back(apply_to_tensors(value, fn));
  return out;
}

c10::IValue apply_to_tensors(const c10::IValue& value, const TensorFn& fn) { return apply_ivalue(value, fn); }

std::vector<c10::IValue> apply_to_tensors(const std::vector<c10::IValue>& inputs, const TensorFn& fn) {
  std::vector<c10::IValue> out;
  out.reserve(inputs.size());
  for (const auto& input : inputs) out.push_back(apply_ivalue(input, fn));
  return out;
}

IValueKwargs apply_to_tensors(const IValueKwargs& kwargs, const TensorFn& fn) {
  IValueKwargs out;
  out.reserve(kwargs.size());
  for (const auto& [name, value] : kwargs) out.emplace(name, apply_ivalue(value, fn));
  return out;
}

at::Tensor cast_if_floating(const at::Tensor& tensor, at::ScalarType dtype) {
  check_floating(dtype);
  if (!tensor.defined() || !at::isFloatingType(tensor.scalar_type()) || tensor.scalar_type() == dtype) return tensor;
  return tensor.to(dtype);
}

c10::IValue cast_forward_inputs(std::optional<at::ScalarType> dtype, const c10::IValue& input) {
  if (!dtype) return input;
  check_floating(*dtype);
  return apply_ivalue(input, caster(*dtype));
}

std::vector<c10::IValue> cast_forward_inputs(std::optional<at::ScalarType> dtype,
                                             const std::vector<c10::IValue>& inputs) {
  if (!dtype) return inputs;
  check_floating(*dtype);
  return apply_to_tensors(inputs, caster(*dtype));
}

IValueKwargs cast_forward_inputs(std::optional<at::ScalarType> dtype, const IValueKwargs& kwargs) {
  if (!dtype) return kwargs;
  check_floating(*dtype);
  return apply_to_tensors(kwargs, caster(*dtype));
}

StateDict cast_forward_inputs(std::optional<at::ScalarType> dtype, const StateDict& inputs) {
  if (!dtype) return inputs;
  check_floating(*dtype);
  return apply_to_tensors(inputs, caster(*dtype));
}

}  // namespace h5dcp
