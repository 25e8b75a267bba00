// Fuzz target: reading torch.save files, from their data.pkl on. The input
// is the pickle (data.pkl). It is unpickled and indexed the way the
// coordinator does it (a torch.save index encodes and decodes to the same
// bytes, as the index other ranks receive must), then written into a real
// torch.save zip archive (data.pkl plus a record data/<key> for each storage
// it names, at most 4 KiB each, so large storages are short of bytes) that
// read_torch_save reads back whole; a state dict that reads back is written
// with write_torch_save and read again. Any h5dcp::Error is a right answer;
// a crash, a sanitizer report or an exception of another type (a LibTorch
// c10::Error from a view the reader should have refused) is a bug.
//
// The zip container itself is parsed by LibTorch's PyTorchStreamReader
// (miniz), not by h5dcp, and is not fuzzed here: the archive is always
// well-formed. Seeds: tests/fuzz/make_pickle_seeds.py.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <ATen/Parallel.h>

#include "formats/pickle_reader.hpp"
#include "formats/torch_save_index.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/torch_save.hpp"
#include "interop/torch_save/archive.hpp"

namespace {

namespace d = h5dcp::detail;

std::string g_dir;  // a private directory on tmpfs
// H5DCP_FUZZ_VERBOSE=1: prints why an input was refused (to check a seed).
const bool g_verbose = std::getenv("H5DCP_FUZZ_VERBOSE") != nullptr;

void refused(const char* step, const h5dcp::Error& e) {
  if (g_verbose) std::fprintf(stderr, "  %s: %s\n", step, e.what());
}

// The archive of `pickle` with a record for every storage `index` names.
void write_archive(const std::string& path, std::string_view pickle, const d::TorchSaveIndex& index) {
  d::TorchSaveWriter writer(path);
  writer.write_record("data.pkl", pickle.data(), pickle.size());
  for (const auto& [key, storage] : index.storages) {
    // Whole for small storages, at most 4 KiB: enough for every view the
    // reader must accept, and short for the ones it must refuse.
    const auto element = h5dcp::dtype_size(storage.dtype);
    const auto bytes = static_cast<std::size_t>(std::min<std::uint64_t>(storage.numel, 4096) * element);
    std::string data(std::min<std::size_t>(bytes, 4096), '\x01');
    writer.write_record("data/" + key, data.data(), data.size());
  }
  writer.commit();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  at::set_num_threads(1);
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmp ? tmp : "/tmp")) + "/h5dcp-fuzz-pickle.XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  g_dir = pattern;
  std::atexit([] {
    for (const char* name : {"/in.pt", "/out.pt"}) std::remove((g_dir + name).c_str());
    rmdir(g_dir.c_str());
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view pickle(reinterpret_cast<const char*>(data), size);
  d::TorchSaveIndex index;
  try {
    const auto root = d::pickle::unpickle(pickle, "the fuzz input");
    index = d::index_torch_save(*root, "the fuzz input", pickle.size());
  } catch (const h5dcp::Error& e) {
    refused("unpickle", e);
    return 0;
  }
  const auto encoded = d::encode(index);
  if (d::encode(d::decode_torch_save_index(encoded)) != encoded) std::abort();
  (void)d::metadata_of(index);

  const auto in = g_dir + "/in.pt";
  const auto out = g_dir + "/out.pt";
  try {
    // The archive is the harness's own scaffolding; a storage key the zip
    // writer refuses is a refusal too (IoError), not a crash.
    write_archive(in, pickle, index);
    const auto state = h5dcp::read_torch_save(in);
    h5dcp::write_torch_save(state, out);
    (void)h5dcp::read_torch_save(out);
  } catch (const h5dcp::Error& e) {
    refused("read_torch_save", e);
  }
  return 0;
}
