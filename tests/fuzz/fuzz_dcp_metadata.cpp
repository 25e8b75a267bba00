// Fuzz target: a PyTorch DCP checkpoint's `.metadata`, the pickle h5dcp reads
// with its closed list of DCP classes (formats/dcp_metadata.hpp). Any input
// must be answered with an h5dcp::Error (never a crash, undefined behaviour,
// or an allocation sized by the input beyond the pickle reader's budget); a
// pickle that reads must describe chunks that tile their tensors, and write
// back (write_dcp_metadata) into a pickle that reads to the same metadata.
//
// Input: the bytes of a .metadata file.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "formats/dcp_metadata.hpp"
#include "h5dcp/error.hpp"
#include "plan/chunk_geometry.hpp"

namespace {

void require(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz_dcp_metadata: %s\n", what);
    std::abort();
  }
}

bool same(const h5dcp::detail::DcpMetadata& a, const h5dcp::detail::DcpMetadata& b) {
  if (a.version != b.version || a.tensors.size() != b.tensors.size() || a.values.size() != b.values.size() ||
      a.paths.size() != b.paths.size())
    return false;
  for (const auto& [key, t] : a.tensors) {
    const auto it = b.tensors.find(key);
    if (it == b.tensors.end() || it->second.dtype != t.dtype || it->second.size != t.size ||
        it->second.chunks.size() != t.chunks.size())
      return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace h5dcp::detail;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  DcpMetadata md;
  try {
    md = read_dcp_metadata(input, "'fuzz'");
  } catch (const h5dcp::Error&) {
    return 0;
  }
  for (const auto& [key, t] : md.tensors) {
    std::int64_t covered = 0;
    for (const auto& chunk : t.chunks) covered += volume(chunk.box.sizes);
    require(volume(t.size) == 0 || covered == volume(t.size), "accepted chunks that do not tile their tensor");
  }
  const auto again = read_dcp_metadata(write_dcp_metadata(md), "'fuzz, written back'");
  require(same(md, again), "metadata written back does not read to the same");
  return 0;
}
