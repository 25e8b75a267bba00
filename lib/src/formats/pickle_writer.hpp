#pragma once
// A pickle writer that emits what Python's torch.save emits for the same
// objects (protocol 2): dicts, lists, tuples, str, bytes, int, float, bool,
// None, and tensors rebuilt with torch._utils._rebuild_tensor_v2 from
// storages named by BINPERSID. Python's torch.load and our reader read it.
// For DCP's .metadata also instances (NEWOBJ and BUILD, as Python pickles a
// dataclass), globals, and calls (a Global with arguments in `items`).

#include <string>

#include "formats/pickle_value.hpp"

namespace h5dcp::detail::pickle {

/// The protocol-2 pickle of `root`. Throws UsageError for objects a pickle
/// cannot hold here (a bare Storage) or a str that is not UTF-8.
std::string pickle(const Object& root);

}  // namespace h5dcp::detail::pickle
