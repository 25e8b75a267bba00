// Fuzz target: a safetensors header and a model.safetensors.index.json, the
// JSON h5dcp reads from files it is asked to convert. Any input must be
// answered with an h5dcp::Error (never a crash, undefined behaviour, or an
// allocation sized by the input beyond the input itself); a header that
// parses must be consistent (its tensors tile the data exactly) and compose
// back into a header that parses to the same tensors.
//
// Input: byte 0 picks the parser (even: header, odd: index); for a header,
// bytes 1-2 give the size of the data section (0-65535), the rest is JSON.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "formats/safetensors_header.hpp"
#include "h5dcp/error.hpp"

namespace {

void require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_safetensors: %s\n", what);
    std::abort();
  }
}

void header(std::string_view json, std::uint64_t data_bytes) {
  using namespace h5dcp::detail;
  SafetensorsHeader parsed;
  try {
    parsed = parse_safetensors_header(json, data_bytes, "fuzz");
  } catch (const h5dcp::Error&) {
    return;
  }
  std::uint64_t at = 0;
  for (const auto& t : parsed.tensors) {
    require(t.begin == at && t.end >= t.begin, "accepted tensors that do not tile the data");
    at = t.end;
  }
  require(at == data_bytes, "accepted tensors that do not cover the data");
  const auto again = compose_safetensors_header(parsed.tensors, parsed.metadata);
  const auto reparsed = parse_safetensors_header(std::string_view(again).substr(8), data_bytes, "fuzz");
  require(reparsed.tensors.size() == parsed.tensors.size() && reparsed.metadata == parsed.metadata,
          "a composed header does not parse to the same tensors");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (data[0] % 2 == 1) {
    try {
      h5dcp::detail::parse_safetensors_index(input.substr(1), "fuzz");
    } catch (const h5dcp::Error&) {
    }
    return 0;
  }
  if (size < 3) return 0;
  header(input.substr(3), std::uint64_t{data[1]} | (std::uint64_t{data[2]} << 8));
  return 0;
}
