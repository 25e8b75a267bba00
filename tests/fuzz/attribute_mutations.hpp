#pragma once
// What the fuzz targets that damage a checkpoint file's attributes share
// (fuzz_checkpoint.cpp, fuzz_local_copy.cpp): the script of mutations an
// input is, applied with plain serial HDF5 to a fresh copy of a valid file,
// and the harness around the readers.
//
// The script (make_*_seeds.py write seeds in it): until the input ends,
// mutations of
//   byte  object: index into the file's objects, "/" first, then every
//         group and dataset in name order (mod their count)
//   byte  attribute: < 0x80: the object's attribute of that index (mod their
//         count; a name of the target's list when it has none); >= 0x80:
//         names[b - 0x80] (mod the count), present or not
//   byte  operation (mod 4): 0 delete it; 1 a variable-length string;
//         2 a fixed-length string; 3 an integer array
//   strings: byte n, then n bytes (fewer when the input ends)
//   integers: byte type (mod 8: int8, uint8, int16, uint16, int32, uint32,
//         int64, uint64, little-endian); byte rank (mod 4: scalar, 1-D, 2-D,
//         null dataspace); a byte per dimension (mod 9); then the elements'
//         little-endian bytes (zeros once the input ends)
//
// Only attributes are mutated, never the file's bytes: HDF5 1.10 has known
// crashes on malformed files that h5dcp cannot fix.

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
#include <utility>
#include <variant>
#include <vector>

#include "h5dcp/h5dcp.hpp"
#include "hdf5/container_layout.hpp"

namespace h5dcp_fuzz {

// HDF5 calls of the mutator print nothing: a mutation HDF5 refuses is skipped.
struct QuietHdf5 {
  H5E_auto2_t func = nullptr;
  void* data = nullptr;
  QuietHdf5() {
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  QuietHdf5(const QuietHdf5&) = delete;
  QuietHdf5& operator=(const QuietHdf5&) = delete;
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

inline void write_string(hid_t object, const std::string& name, const std::string& text, bool variable) {
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

inline void write_integers(hid_t object, const std::string& name, Script& script) {
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

// The attribute names of a checkpoint, the local tier's excepted
// (fuzz_local_copy.cpp adds them after these): a seed's byte 0x80 + i names
// the i-th of a target's list, so the order is the seeds'.
inline std::vector<std::string> checkpoint_attribute_names() {
  namespace layout = h5dcp::detail::layout;
  return {
      layout::kFormatVersion, layout::kLibraryVersion, layout::kWorldSize, layout::kCreated, layout::kChecksumAlgorithm,
      layout::kKey,           layout::kContainer,      layout::kKind,      layout::kDType,   layout::kChunkOffsets,
      layout::kChunkSizes,    layout::kChecksumRows,   layout::kChecksums};
}

// A valid file to damage: its bytes, its objects ("/" first, then every
// group and dataset in name order) and the attribute names the script's
// bytes >= 0x80 pick from.
struct Pristine {
  std::string bytes;
  std::vector<std::string> objects;
  std::vector<std::string> names;
};

inline herr_t collect_object(hid_t, const char* name, const H5O_info_t*, void* objects) {
  if (std::string(name) != ".") static_cast<std::vector<std::string>*>(objects)->push_back("/" + std::string(name));
  return 0;
}

// The pristine copy of the file at `path` (which the caller removes).
inline Pristine read_pristine(const std::string& path, std::vector<std::string> names) {
  Pristine p;
  p.names = std::move(names);
  std::ifstream in(path, std::ios::binary);
  p.bytes.assign(std::istreambuf_iterator<char>(in), {});
  p.objects.push_back("/");
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file < 0) std::abort();
  H5Ovisit2(file, H5_INDEX_NAME, H5_ITER_INC, collect_object, &p.objects, H5O_INFO_BASIC);
  H5Fclose(file);
  return p;
}

// One mutation of the script on the open file.
inline void mutate(hid_t file, const Pristine& pristine, Script& script) {
  const auto& path = pristine.objects[script.byte() % pristine.objects.size()];
  const std::uint8_t which = script.byte();
  const int operation = script.byte() % 4;
  const hid_t object = H5Oopen(file, path.c_str(), H5P_DEFAULT);
  if (object < 0) return;
  std::string name = pristine.names[(which & 0x7f) % pristine.names.size()];
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

// Writes the pristine file to `path`, then the input's mutations (8 at most).
inline void write_mutated(const Pristine& pristine, const std::string& path, const std::uint8_t* data,
                          std::size_t size) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(pristine.bytes.data(), static_cast<std::streamsize>(pristine.bytes.size()));
    if (!out) std::abort();
  }
  QuietHdf5 quiet;
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  if (file < 0) std::abort();
  Script script(data, size);
  for (int n = 0; n < 8 && !script.done(); ++n) mutate(file, pristine, script);
  if (H5Fclose(file) < 0) std::abort();
}

// H5DCP_FUZZ_VERBOSE=1: prints the objects a script indexes, and what each
// reader answered (to check that a seed reaches what it was written for).
inline bool verbose() {
  static const bool on = std::getenv("H5DCP_FUZZ_VERBOSE") != nullptr;
  return on;
}

inline void print_objects(const Pristine& pristine) {
  if (!verbose()) return;
  for (std::size_t i = 0; i < pristine.objects.size(); ++i)
    std::fprintf(stderr, "object %zu: %s\n", i, pristine.objects[i].c_str());
}

// Runs one reader: an h5dcp::Error is a right answer for a damaged file.
template <typename Read>
void expect_no_crash(const char* reader, Read&& read) {
  try {
    read();
    if (verbose()) std::fprintf(stderr, "  %s: ok\n", reader);
  } catch (const h5dcp::Error& e) {
    if (verbose()) std::fprintf(stderr, "  %s: %s\n", reader, e.what());
  }
}

// A private directory for the target's files, on tmpfs where there is one;
// `name` names the target.
inline std::string private_directory(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (tmp ? tmp : "/tmp")) +
                        "/h5dcp-fuzz-" + name + ".XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) std::abort();
  return pattern;
}

// Opening a file must cost little: each input opens it several times. Under
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
// input for the checkpoint target: HDF5's and MPI's global state made it
// scan the heap after nearly every input. LeakSanitizer still checks at exit.)
// The hints file is `directory`/romio-hints (for the caller to remove).
inline void make_opening_files_cheap(const std::string& directory) {
  const auto hints = directory + "/romio-hints";
  std::ofstream(hints) << "cb_buffer_size 65536\nind_rd_buffer_size 65536\nind_wr_buffer_size 65536\n";
  ::setenv("ROMIO_HINTS", hints.c_str(), /*overwrite=*/0);
  H5set_free_list_limits(-1, -1, -1, -1, -1, -1);
}

// MPI as a singleton (no mpiexec), on ROMIO like the MPI tests; finalized at exit.
inline void start_mpi() {
  h5dcp::prefer_romio_io_component();
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
}

// The readers that take any checkpoint file: CheckpointReader (every entry
// read) and verify_checkpoint.
inline void read_as_any_checkpoint(const std::string& path) {
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
    if (verbose())
      for (const auto& p : report.problems)
        std::fprintf(stderr, "  verify: [%s] %s: %s\n", p.check.c_str(), p.where.c_str(), p.message.c_str());
  });
}

}  // namespace h5dcp_fuzz
