// Fuzz target: the binary codecs of what ranks exchange (save plans, the
// global plan, metadata, chunk checksums, the checkpoint index the
// coordinator reads from a file and broadcasts, the torch.save index, the
// parameter signatures of verify_param_shapes_across_ranks).
// A rank decodes bytes another rank sent; damaged bytes must be an
// h5dcp::Error, never a crash, undefined behaviour, or an allocation sized
// by a corrupt count.
//
// Input: byte 0 picks the decoder (mod 7), the rest is the message. A
// message that decodes is encoded again, and that encoding must decode and
// encode to the same bytes (encoding is canonical; a decoder that accepts
// what it cannot represent would break this).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "formats/torch_save_index.hpp"
#include "h5dcp/error.hpp"
#include "plan/codec.hpp"
#include "training/param_agreement.hpp"

namespace {

using h5dcp::detail::encode;

template <typename Decode, typename Encode>
void round_trip(std::string_view message, Decode decode, Encode encode) {
  h5dcp::detail::Bytes once;
  try {
    once = encode(decode(message));
  } catch (const h5dcp::Error& e) {
    // H5DCP_FUZZ_VERBOSE=1 says why (to check that a seed decodes).
    if (std::getenv("H5DCP_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "  refused: %s\n", e.what());
    return;  // refused: the right answer for damaged bytes
  }
  if (encode(decode(once)) != once) std::abort();  // not a canonical encoding
}

template <typename Decode>
void round_trip(std::string_view message, Decode decode) {
  round_trip(message, decode, [](const auto& decoded) { return encode(decoded); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view message(reinterpret_cast<const char*>(data) + 1, size - 1);
  namespace d = h5dcp::detail;
  switch (data[0] % 7) {
    case 0: round_trip(message, d::decode_save_plan); break;
    case 1: round_trip(message, d::decode_global_save_plan); break;
    case 2: round_trip(message, d::decode_metadata); break;
    case 3: round_trip(message, d::decode_chunk_checksums); break;
    case 4: round_trip(message, d::decode_checkpoint_index); break;
    case 5: round_trip(message, d::decode_torch_save_index); break;
    case 6: round_trip(message, d::decode_signatures, d::encode_signatures); break;
  }
  return 0;
}
