#pragma once
// Do all ranks hold the same parameters? Pure: each rank's list of (name,
// dtype, shape) in, a message naming each parameter that differs and the
// ranks on each side out. Every rank that runs it on the same gathered lists
// gets the same message, so every rank can throw the same error.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/byte_codec.hpp"

namespace h5dcp::detail {

struct ParamSignature {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  friend bool operator==(const ParamSignature& a, const ParamSignature& b) {
    return a.name == b.name && a.dtype == b.dtype && a.shape == b.shape;
  }
};

Bytes encode_signatures(const std::vector<ParamSignature>& signatures);
/// Throws Error on a corrupt message.
std::vector<ParamSignature> decode_signatures(std::string_view bytes);

/// "rank 3", "ranks 0, 1", "ranks 0, 2-5" (runs of three or more as ranges).
std::string format_ranks(std::vector<int> ranks);

/// Empty when every rank holds the same parameters (names, dtypes, shapes)
/// in the same order; otherwise a message: one line per differing parameter
/// with each variant and the ranks holding it ("missing" included), or, when
/// only the order differs, the first differing position of each rank. At most
/// `max_lines` lines, then a count of the rest. `what` names the tensors
/// ("parameters", "module states").
std::string describe_param_disagreement(const std::vector<std::vector<ParamSignature>>& per_rank,
                                        std::string_view what = "parameters", std::size_t max_lines = 16);

}  // namespace h5dcp::detail
