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
// The script of mutations an input is: tests/fuzz/attribute_mutations.hpp
// (tests/fuzz/make_checkpoint_seeds.py writes seeds in it).

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ATen/Functions.h>
#include <ATen/Parallel.h>

#include "attribute_mutations.hpp"
#include "h5dcp/h5dcp.hpp"

namespace {

std::string g_dir;  // a private directory on tmpfs
h5dcp_fuzz::Pristine g_pristine;

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

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = h5dcp_fuzz::private_directory("checkpoint");
  h5dcp_fuzz::make_opening_files_cheap(g_dir);
  h5dcp_fuzz::start_mpi();
  at::set_num_threads(1);
  const auto path = g_dir + "/pristine.h5";
  h5dcp::save(make_state(false), path, {}, MPI_COMM_SELF);
  g_pristine = h5dcp_fuzz::read_pristine(path, h5dcp_fuzz::checkpoint_attribute_names());
  std::remove(path.c_str());
  h5dcp_fuzz::print_objects(g_pristine);
  std::atexit([] {
    std::remove((g_dir + "/mutated.h5").c_str());
    std::remove((g_dir + "/romio-hints").c_str());
    rmdir(g_dir.c_str());
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = g_dir + "/mutated.h5";
  h5dcp_fuzz::write_mutated(g_pristine, path, data, size);
  h5dcp_fuzz::expect_no_crash("read_metadata", [&] { h5dcp::read_metadata(path, {}, MPI_COMM_SELF); });
  h5dcp_fuzz::read_as_any_checkpoint(path);
  h5dcp_fuzz::expect_no_crash("load_all", [&] { (void)h5dcp::load_all(path, {}, MPI_COMM_SELF); });
  h5dcp_fuzz::expect_no_crash("load", [&] {
    auto state = make_state(true);
    h5dcp::LoadOptions options;
    options.strict = false;
    (void)h5dcp::load(state, path, options, MPI_COMM_SELF);
  });
  return 0;
}
