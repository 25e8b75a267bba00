// Fuzz target: h5dcp's parsing of a checkpoint's attributes, by every reader.
//
// LLVMFuzzerInitialize saves one small valid checkpoint on MPI_COMM_SELF
// (tensors of several dtypes saved as 2 chunks each, a 0-d, an empty and a
// small whole one in the packs of format 1.2, nested dicts and lists, keys
// that need escaping, a value of each encoding). Each input is a script of attribute mutations, applied with
// plain serial HDF5 to a fresh copy of that file; then read_metadata,
// CheckpointReader, verify_checkpoint, load_all and load read it. Any
// h5dcp::Error is a right answer. A crash, a sanitizer report, an exception of
// another type, or HDF5 printing its error stack (h5dcp must turn HDF5 errors
// into exceptions) is a bug.
//
// What is fuzzed is the content of h5dcp's attributes (strings, dtypes,
// shapes, chunk offsets and sizes, key escaping, format versions, checksums),
// not HDF5's own parser of file bytes: HDF5 1.10 has known crashes on
// malformed files that h5dcp cannot fix, so the file's bytes are never
// mutated, only its attributes through the HDF5 API.
//
// The script (tests/fuzz/make_checkpoint_seeds.py writes seeds in it): until
// the input ends, mutations of
//   byte  object: index into the file's objects, "/" first, then every
//         group and dataset in name order (mod their count)
//   byte  attribute: < 0x80: the object's attribute of that index (mod their
//         count; a format name when it has none); >= 0x80: kNames[b - 0x80]
//         (mod the count), present or not
//   byte  operation (mod 4): 0 delete it; 1 a variable-length string;
//         2 a fixed-length string; 3 an integer array
//   strings: byte n, then n bytes (fewer when the input ends)
//   integers: byte type (mod 8: int8, uint8, int16, uint16, int32, uint32,
//         int64, uint64, little-endian); byte rank (mod 4: scalar, 1-D, 2-D,
//         null dataspace); a byte per dimension (mod 9); then the elements'
//         little-endian bytes (zeros once the input ends)

#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ATen/Functions.h>
#include <ATen/Parallel.h>

#include "h5dcp/h5dcp.hpp"

namespace {

// Every attribute name of the format (lib/src/hdf5/container_layout.hpp).
const char* const kNames[] = {
    "h5dcp.format_version",
    "h5dcp.library_version",
    "h5dcp.world_size",
    "h5dcp.created",
    "h5dcp.checksum_algorithm",
    "h5dcp.key",
    "h5dcp.container",
    "h5dcp.kind",
    "h5dcp.dtype",
    "h5dcp.chunk_offsets",
    "h5dcp.chunk_sizes",
    "h5dcp.checksum_rows",
    "h5dcp.checksums",
};
constexpr std::size_t kNameCount = sizeof(kNames) / sizeof(kNames[0]);

std::string g_dir;                   // a private directory on tmpfs
std::string g_pristine;              // the bytes of the valid checkpoint
std::vector<std::string> g_objects;  // "/", then every object's path, in name order

// The state dict saved; called again (zeroed tensors) as the target of load().
h5dcp::StateDict make_state(bool zero) {
  const auto values = [zero](at::Tensor t) { return zero ? at::zeros_like(t) : t; };
  const auto rows = at::arange(24, at::kFloat).reshape({6, 4});
  // Two shards on one rank: the file records 2 chunks, and the tensor keeps
  // a dataset of its own with its attributes (format 1.2 packs only tensors
  // saved whole).
  const auto halves = [&](at::Tensor t) {
    t = values(t);
    const auto cut = t.size(0) / 2;
    std::vector<std::int64_t> second(static_cast<std::size_t>(t.dim()), 0);
    second[0] = cut;
    return h5dcp::ShardedTensor(t.sizes().vec(),
                                {h5dcp::Shard{t.slice(0, 0, cut).clone(), std::vector<std::int64_t>(second.size(), 0)},
                                 h5dcp::Shard{t.slice(0, cut).clone(), second}});
  };
  h5dcp::StateDict model{
      // Rows [0:2] and [2:6], the chunks the seeds' chunk mutations start from.
      {"weight", h5dcp::ShardedTensor({6, 4}, {h5dcp::Shard{values(rows.slice(0, 0, 2).clone()), {0, 0}},
                                               h5dcp::Shard{values(rows.slice(0, 2, 6).clone()), {2, 0}}})},
      {"bias", halves(at::arange(4, at::kBFloat16))},
      {"grid", halves(at::arange(6, at::kHalf).reshape({2, 3}))},
      {"mask", halves(at::arange(5, at::kLong).remainder(2).to(at::kBool))},
      {"ids", halves(at::arange(3, at::kLong))},
      {"small", halves(at::arange(4, at::kInt).to(at::kChar).reshape({2, 2}))},
      {"bytes", halves(at::arange(3, at::kShort).to(at::kByte))},
      // Saved whole and small: rows of the packs' index, no datasets.
      {"norm", values(at::arange(3, at::kBFloat16))},
      {"scalar", values(at::scalar_tensor(2.5, at::kDouble))},
      {"empty", values(at::zeros({0, 3}, at::kFloat))},
  };
  h5dcp::StateDict group{{"lr", 1e-3}, {"betas", h5dcp::StateList{0.9, 0.999}}, {"name", "adam"}};
  return h5dcp::StateDict{
      {"model", std::move(model)},
      {"optim", h5dcp::StateDict{{"param_groups", h5dcp::StateList{std::move(group)}}, {"state", h5dcp::StateDict{}}}},
      {"step", std::int64_t{7}},
      {"flag", true},
      {"nothing", h5dcp::StateValue{}},
      {"blob", h5dcp::ByteString{std::string("\0\1\2", 3)}},
      {"pickled", h5dcp::PickledObject{"\x80\x02K\x07."}},
      {"a/b%c", "escaped key"},  // stored as a%2Fb%25c
      {".", std::int64_t{1}},    // stored as %2E
      {"", 0.5},                 // stored as %
  };
}

herr_t collect_object(hid_t, const char* name, const H5O_info_t*, void*) {
  if (std::string(name) != ".") g_objects.push_back("/" + std::string(name));
  return 0;
}

// HDF5 calls of the mutator print nothing: a mutation HDF5 refuses is skipped.
struct QuietHdf5 {
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  QuietHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHdf5() { H5Eset_auto2(H5E_DEFAULT, func, data); }
};

class Script {
 public:
  Script(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  std::uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::string bytes(std::size_t n) {
    n = std::min(n, size_ - std::min(pos_, size_));
    std::string out(reinterpret_cast<const char*>(data_) + pos_, n);
    pos_ += n;
    return out;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

void write_string(hid_t object, const std::string& name, const std::string& text, bool variable) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, variable ? H5T_VARIABLE : std::max<std::size_t>(text.size(), 1));
  H5Tset_cset(type, H5T_CSET_UTF8);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t attr = H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (attr >= 0) {
    const std::string padded = text.empty() ? std::string(1, '\0') : text;
    const char* pointer = text.c_str();  // a variable-length string ends at its first NUL
    H5Awrite(attr, type, variable ? static_cast<const void*>(&pointer) : padded.data());
    H5Aclose(attr);
  }
  H5Sclose(space);
  H5Tclose(type);
}

void write_integers(hid_t object, const std::string& name, Script& script) {
  static const hid_t kTypes[] = {H5T_STD_I8LE,  H5T_STD_U8LE,  H5T_STD_I16LE, H5T_STD_U16LE,
                                 H5T_STD_I32LE, H5T_STD_U32LE, H5T_STD_I64LE, H5T_STD_U64LE};
  const hid_t type = kTypes[script.byte() % 8];
  const int rank = script.byte() % 4;
  hid_t space = -1;
  std::size_t count = 1;
  if (rank == 0) {
    space = H5Screate(H5S_SCALAR);
  } else if (rank == 3) {
    space = H5Screate(H5S_NULL);
    count = 0;
  } else {
    hsize_t dims[2] = {0, 0};
    for (int d = 0; d < rank; ++d) count *= (dims[d] = script.byte() % 9);
    space = H5Screate_simple(rank, dims, nullptr);
  }
  std::string elements = script.bytes(count * H5Tget_size(type));
  elements.resize(count * H5Tget_size(type), '\0');
  const hid_t attr = H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (attr >= 0) {
    if (count > 0) H5Awrite(attr, type, elements.data());
    H5Aclose(attr);
  }
  H5Sclose(space);
}

// One mutation of the script on the open file.
void mutate(hid_t file, Script& script) {
  const auto& path = g_objects[script.byte() % g_objects.size()];
  const std::uint8_t which = script.byte();
  const int operation = script.byte() % 4;
  const hid_t object = H5Oopen(file, path.c_str(), H5P_DEFAULT);
  if (object < 0) return;
  std::string name = kNames[(which & 0x7f) % kNameCount];
  H5O_info_t info{};
  if (which < 0x80 && H5Oget_info2(object, &info, H5O_INFO_NUM_ATTRS) >= 0 && info.num_attrs > 0) {
    char buffer[256] = {};
    if (H5Aget_name_by_idx(object, ".", H5_INDEX_NAME, H5_ITER_INC, which % info.num_attrs, buffer, sizeof buffer,
                           H5P_DEFAULT) > 0)
      name = buffer;
  }
  if (H5Aexists(object, name.c_str()) > 0) H5Adelete(object, name.c_str());
  if (operation == 1 || operation == 2) {
    const auto n = script.byte();
    write_string(object, name, script.bytes(n), operation == 1);
  } else if (operation == 3) {
    write_integers(object, name, script);
  }
  H5Oclose(object);
}

std::string mutated_copy(const std::uint8_t* data, std::size_t size) {
  const auto path = g_dir + "/mutated.h5";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(g_pristine.data(), static_cast<std::streamsize>(g_pristine.size()));
    if (!out) std::abort();
  }
  QuietHdf5 quiet;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) std::abort();
  Script script(data, size);
  for (int n = 0; n < 8 && !script.done(); ++n) mutate(file, script);
  if (H5Fclose(file) < 0) std::abort();
  return path;
}

// H5DCP_FUZZ_VERBOSE=1: prints the objects a script indexes, and what each
// reader answered (to check that a seed reaches what it was written for).
const bool g_verbose = std::getenv("H5DCP_FUZZ_VERBOSE") != nullptr;

// Runs one reader: an h5dcp::Error is a right answer for a damaged file.
template <typename Read>
void expect_no_crash(const char* reader, Read&& read) {
  try {
    read();
    if (g_verbose) std::fprintf(stderr, "  %s: ok\n", reader);
  } catch (const h5dcp::Error& e) {
    if (g_verbose) std::fprintf(stderr, "  %s: %s\n", reader, e.what());
  }
}

// Opening a file must cost little: each input opens it about 7 times. Under
// ASan every fresh page of a large allocation costs a page fault and a shadow
// update, and two large allocations were made at every open (an MPI-IO open
// and close took ~10 ms, a serial one ~1 ms; both well under 1 ms without):
//  - ROMIO's default 16 MiB collective and independent I/O buffers. The
//    fuzzer's files are a few KB: 64 KiB buffers (ROMIO_HINTS names a file of
//    hints that ROMIO reads at every open; the library sets none) change
//    nothing that is read.
//  - HDF5's metadata cache, over 1 MiB, calloc'ed at every H5Fopen: its free
//    lists drop a block that large at once. Unlimited free lists keep it.
// (scripts/sanitize.sh also turns off libFuzzer's leak check after every
// input for this target: HDF5's and MPI's global state made it scan the heap
// after nearly every input. LeakSanitizer still checks at exit.)
void make_opening_files_cheap() {
  const auto hints = g_dir + "/romio-hints";
  std::ofstream(hints) << "cb_buffer_size 65536\nind_rd_buffer_size 65536\nind_wr_buffer_size 65536\n";
  ::setenv("ROMIO_HINTS", hints.c_str(), /*overwrite=*/0);
  H5set_free_list_limits(-1, -1, -1, -1, -1, -1);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmp ? tmp : "/tmp")) + "/h5dcp-fuzz-checkpoint.XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  g_dir = pattern;
  make_opening_files_cheap();
  h5dcp::prefer_romio_io_component();
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
  at::set_num_threads(1);
  const auto path = g_dir + "/pristine.h5";
  h5dcp::save(make_state(false), path, {}, MPI_COMM_SELF);
  std::ifstream in(path, std::ios::binary);
  g_pristine.assign(std::istreambuf_iterator<char>(in), {});
  g_objects.push_back("/");
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, collect_object, nullptr, H5O_INFO_BASIC);
  H5Fclose(file);
  std::remove(path.c_str());
  if (g_verbose)
    for (std::size_t i = 0; i < g_objects.size(); ++i)
      std::fprintf(stderr, "object %zu: %s\n", i, g_objects[i].c_str());
  std::atexit([] {
    std::remove((g_dir + "/mutated.h5").c_str());
    std::remove((g_dir + "/romio-hints").c_str());
    rmdir(g_dir.c_str());
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = mutated_copy(data, size);
  expect_no_crash("read_metadata", [&] { h5dcp::read_metadata(path, {}, MPI_COMM_SELF); });
  expect_no_crash("CheckpointReader", [&] {
    h5dcp::CheckpointReader reader(path);
    for (const auto& [fqn, storage] : reader.metadata().state_dict_metadata) {
      if (std::holds_alternative<h5dcp::TensorStorageMetadata>(storage))
        (void)reader.read_tensor(fqn);
      else
        (void)reader.value(fqn);
    }
    reader.close();
  });
  expect_no_crash("verify_checkpoint", [&] {
    const auto report = h5dcp::verify_checkpoint(path);
    if (g_verbose)
      for (const auto& p : report.problems)
        std::fprintf(stderr, "  verify: [%s] %s: %s\n", p.check.c_str(), p.where.c_str(), p.message.c_str());
  });
  expect_no_crash("load_all", [&] { (void)h5dcp::load_all(path, {}, MPI_COMM_SELF); });
  expect_no_crash("load", [&] {
    auto state = make_state(true);
    h5dcp::LoadOptions options;
    options.strict = false;
    (void)h5dcp::load(state, path, options, MPI_COMM_SELF);
  });
  return 0;
}
