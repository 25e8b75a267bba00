#pragma once
// The distributed utilities of PyTorch's torch/distributed/utils.py, for
// LibTorch: tensors in nested containers (apply, cast, move), key prefixes,
// and storage release. None of these is collective. The collective ones
// (broadcasting a module's states, checking parameter shapes across ranks)
// are in h5dcp/training/module_sync.hpp; the rank -> GPU mapping in h5dcp/training/device.hpp.
//
// "Nested containers" are of two families:
// - h5dcp's state dicts: StateValue / StateDict / StateList, to any depth.
//   A ShardedTensor's local shards are tensors too (their offsets and the
//   global shape are kept). Non-tensor values are copied; Stateful objects
//   are kept as they are (shared), not expanded.
// - c10::IValue, what LibTorch's (TorchScript) modules take as forward
//   inputs: tensors, tensor lists, generic lists, tuples (named ones keep
//   their type), dicts (values only; keys are left alone) and script objects
//   (their attributes, on a shallow copy: PyTorch's dataclass case), to any
//   depth. Other values are returned as they are.
// The result is a new container; tensors `fn` returns unchanged stay shared.

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/ordered_dict.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "h5dcp/state_dict.hpp"

namespace h5dcp {

/// What apply_to_tensors applies: a tensor in, the tensor to put in its place
/// out (the same one, a new one, or a view).
using TensorFn = std::function<at::Tensor(const at::Tensor&)>;

/// LibTorch's forward keyword arguments (torch::jit::Kwargs).
using IValueKwargs = std::unordered_map<std::string, c10::IValue>;

// --- apply a function to every tensor (torch.distributed.utils._apply_to_tensors) ---

/// A copy of the nest with `fn(t)` in place of every tensor `t` (see the top
/// of this header for what counts). Not collective. Whatever `fn` throws
/// propagates unchanged.
at::Tensor apply_to_tensors(const at::Tensor& tensor, const TensorFn& fn);
StateValue apply_to_tensors(const StateValue& value, const TensorFn& fn);
StateDict apply_to_tensors(const StateDict& state_dict, const TensorFn& fn);
StateList apply_to_tensors(const StateList& list, const TensorFn& fn);
c10::IValue apply_to_tensors(const c10::IValue& value, const TensorFn& fn);
std::vector<c10::IValue> apply_to_tensors(const std::vector<c10::IValue>& inputs, const TensorFn& fn);
IValueKwargs apply_to_tensors(const IValueKwargs& kwargs, const TensorFn& fn);

// --- cast floating forward inputs (torch.distributed.utils._cast_forward_inputs) ---

/// `tensor` cast to `dtype` when it is floating (float64/32/16, bfloat16) and
/// not already `dtype`; the same tensor otherwise (integers, bools, complex).
/// The cast is an autograd operation: a tensor that requires grad gives one
/// that requires grad (with grad mode on), and gradients flow back to it in
/// its own dtype. Not collective. Throws UsageError when `dtype` is not a
/// floating type.
at::Tensor cast_if_floating(const at::Tensor& tensor, at::ScalarType dtype);

/// Every floating tensor of the nested forward inputs cast as by
/// cast_if_floating; with no `dtype`, the inputs unchanged. Not collective.
/// Throws UsageError when `dtype` is not a floating type.
c10::IValue cast_forward_inputs(std::optional<at::ScalarType> dtype, const c10::IValue& input);
std::vector<c10::IValue> cast_forward_inputs(std::optional<at::ScalarType> dtype,
                                             const std::vector<c10::IValue>& inputs);
IValueKwargs cast_forward_inputs(std::optional<at::ScalarType> dtype, const IValueKwargs& kwargs);
StateDict cast_forward_inputs(std::optional<at::ScalarType> dtype, const StateDict& inputs);

// --- move nested tensors to a device (torch.distributed.utils._recursive_to) ---

/// A copy of the nest with every tensor on `device`. Tensors already there
/// are kept (shared, not copied); others are copied with Tensor::to.
///
/// With `use_side_stream` and a CUDA target, host -> GPU copies run on a
/// side stream from LibTorch's pool (asynchronous when the host memory is
/// pinned); the device's current stream then waits for them, and each copy
/// is recorded on the current stream so its memory is not reused early — as
/// DDP does. Other copies (and every copy when h5dcp was built against a
/// LibTorch without CUDA: the side-stream code is compiled only when
/// H5DCP_WITH_CUDA is set at configure time) are plain Tensor::to calls.
///
/// Not collective. Throws UsageError when a tensor cannot be moved (e.g. to
/// CUDA with a CPU-only LibTorch), naming the tensor's fqn in a state dict.
StateDict recursive_to(const StateDict& state_dict, c10::Device device, bool use_side_stream = true);
StateValue recursive_to(const StateValue& value, c10::Device device, bool use_side_stream = true);
c10::IValue recursive_to(const c10::IValue& value, c10::Device device, bool use_side_stream = true);
std::vector<c10::IValue> recursive_to(const std::vector<c10::IValue>& inputs, c10::Device device,
                                      bool use_side_stream = true);
IValueKwargs recursive_to(const IValueKwargs& kwargs, c10::Device device, bool use_side_stream = true);

// --- rename key prefixes (torch.distributed.utils._replace_by_prefix) -------

/// Renames, in place, every key that starts with `old_prefix` to
/// `new_prefix` + the rest of the key: e.g. "module." -> "" strips what
/// DistributedDataParallel added. Strong guarantee: on a throw nothing
/// changed. Not collective. Throws UsageError when the prefixes are equal, or
/// when a renamed key would replace another key (naming both).
///
/// On an h5dcp::StateDict this renames its TOP-LEVEL keys only (values, nested
/// dicts included, move with their key); use replace_fqn_prefix for paths
/// inside the nest, or call it on a nested dict.
void replace_by_prefix(StateDict& state_dict, std::string_view old_prefix, std::string_view new_prefix);
/// The same on tensors by name, as a std::map ...
void replace_by_prefix(std::map<std::string, at::Tensor>& tensors, std::string_view old_prefix,
                       std::string_view new_prefix);
/// ... or as torch::nn::Module::named_parameters()/named_buffers() give them:
/// renamed keys keep their position (Python's dict version moves them to the
/// end).
void replace_by_prefix(torch::OrderedDict<std::string, at::Tensor>& tensors, std::string_view old_prefix,
                       std::string_view new_prefix);

/// Renames by fully qualified name: every leaf and container of the nest
/// whose fqn (h5dcp/state_dict.hpp: escaped keys joined by '/') starts with
/// `old_prefix` moves to `new_prefix` + the rest of its fqn, e.g.
/// "model/module." -> "model/" renames "model/module.fc.weight" to
/// "model/fc.weight". Missing parent containers are created as dicts;
/// containers left empty by the move are removed (containers that were empty
/// before stay). Strong guarantee. Not collective. Throws UsageError when the
/// prefixes are equal, when a renamed leaf would replace another leaf, or
/// when the result is not a valid nest (a list with a gap, a leaf where a
/// container must go).
void replace_fqn_prefix(StateDict& state_dict, std::string_view old_prefix, std::string_view new_prefix);

// --- storage release (torch.distributed.utils._free_storage / _alloc_storage) ---
//
// They make sense in LibTorch for the same reason as in PyTorch's FSDP: an
// at::Tensor handle is shared (by the module that registered it, by an
// optimizer's param groups, by autograd), so replacing the tensor would leave
// them holding the old one. Resizing the *storage* releases (or brings back)
// the memory while every holder keeps the same tensor with the same shape
// and dtype, e.g. for a parameter that is gathered only around its use, or a
// staging buffer kept between checkpoints. Views share the storage and are
// freed with it. A freed tensor keeps reporting its shape: reading or writing
// its elements before alloc_storage is undefined behaviour.

/// Releases the memory of `tensor`'s storage (to 0 bytes). Returns false when
/// it was already freed. Not collective. Throws UsageError when the tensor
/// does not start its storage (offset != 0: freeing would pull the storage
/// from under another tensor) or the storage cannot be resized (e.g. memory
/// from at::from_blob).
bool free_storage(const at::Tensor& tensor);

/// Gives `tensor`'s storage room for the elements of `size` again (the
/// contents are uninitialised; the tensor's own shape is not changed).
/// Returns false when the storage already has exactly that size. Not
/// collective. Throws UsageError when the storage is allocated with another
/// size (free it first) or cannot be resized.
bool alloc_storage(const at::Tensor& tensor, at::IntArrayRef size);

/// True when `tensor`'s storage has memory (torch.distributed.utils._data_ptr_allocated).
/// Not collective.
bool storage_allocated(const at::Tensor& tensor);

}  // namespace h5dcp
