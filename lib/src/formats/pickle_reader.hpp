#pragma once
// A pickle reader for what torch.save writes into data.pkl (any pickle
// protocol 2-5), built for that subset rather than for Python in general:
//
// - containers and scalars: dict (SETITEM and SETITEMS: single-entry dicts
//   are fine, unlike LibTorch 1.13's unpickler), list, tuple, str, bytes,
//   int (up to 64 bits), float, bool, None, with every memo opcode;
// - collections.OrderedDict (attributes set with BUILD, like a module state
//   dict's _metadata, are dropped);
// - tensors: torch._utils._rebuild_tensor_v2 / _rebuild_tensor /
//   _rebuild_parameter(_with_state) / torch._tensor._rebuild_from_type_v2 over
//   storages named by BINPERSID ("storage", torch.<Type>Storage, key,
//   location, numel), for the ten dtypes h5dcp stores;
// - bytes as Python 3 pickles them for protocol 2 (_codecs.encode,
//   builtins.bytes), torch.Size.
//
// Anything else (arbitrary classes, sets, sparse or quantized tensors) is a
// FormatError naming the object and the byte offset. Not torch-dependent.
//
// The same reader reads PyTorch DCP's `.metadata` (PicklesOf::DcpMetadata),
// whose objects are instances of a closed list of classes (DCP's metadata
// dataclasses, made by NEWOBJ and filled by BUILD) and a few callables
// (torch.Size, a layout, a memory-format enum, a pathlib path). Every global
// the pickle names is checked against that list when it is named: any other
// class or function is refused before anything could call it.

#include <cstdint>
#include <string>
#include <string_view>

#include "formats/pickle_value.hpp"

namespace h5dcp::detail::pickle {

/// Which pickles, and so which globals are allowed.
enum class PicklesOf : std::uint8_t {
  TorchSave,    ///< a torch.save data.pkl: containers, scalars, tensors
  DcpMetadata,  ///< a DCP .metadata: its dataclasses, containers, scalars
};

/// What reading a pickle took, for tests of its bounds.
struct UnpickleStats {
  std::uint64_t charged_bytes = 0;  ///< memory counted against the reader's budget
  std::uint64_t budget_bytes = 0;   ///< that budget, for this pickle's size
};

/// The object `data` (a whole pickle, up to its STOP) describes. Storages
/// with the same key are the same Storage object. `what` names the pickle in
/// errors (e.g. "'model.pt'"). Throws FormatError on anything malformed or
/// unsupported, or on a pickle that needs more memory than its size
/// justifies (a budget proportional to its bytes: see pickle_reader.cpp).
ObjectPtr unpickle(std::string_view data, const std::string& what, UnpickleStats* stats = nullptr,
                   PicklesOf kind = PicklesOf::TorchSave);

}  // namespace h5dcp::detail::pickle
