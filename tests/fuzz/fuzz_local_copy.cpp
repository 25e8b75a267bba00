// Fuzz target: h5dcp's parsing of a node-local tier's copy (issue 50), by
// every reader that opens one.
//
// LLVMFuzzerInitialize saves one local step with a CheckpointManager on
// MPI_COMM_SELF (a tensor saved as 2 chunks, whole ones of two dtypes, a 0-d
// one, values), so the copy carries the tier's attributes (the run, the
// step, the owner rank, the replica, the saving job's nodes and each rank's,
// each tensor's chunk owners) besides a checkpoint's. Each input is a script
// of attribute mutations (tests/fuzz/attribute_mutations.hpp;
// tests/fuzz/make_local_copy_seeds.py writes seeds in it), applied to a fresh
// copy of that file in its step directory; then read it:
// read_local_copy_summary (what `h5dcp inspect` prints), CheckpointReader,
// verify_checkpoint, the recovery's survey of a node's copies (identity,
// index, chunk owners) and its load from the copies (every checksum). Any
// h5dcp::Error is a right answer; the survey must report a damaged copy as
// not intact, never throw, and the load reports a copy it cannot serve
// (LocalRecoveryResult::damaged) or throws an h5dcp::Error. A crash, a
// sanitizer report, an exception of another type, or HDF5 printing its error
// stack is a bug.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/Functions.h>
#include <ATen/Parallel.h>

#include "api/local_load.hpp"
#include "api/local_save.hpp"
#include "attribute_mutations.hpp"
#include "comm/comm.hpp"
#include "h5dcp/h5dcp.hpp"
#include "hdf5/container_layout.hpp"
#include "hdf5/hdf5_access.hpp"
#include "manager/local_tier.hpp"

namespace {

// The local tier's attribute names, after a checkpoint's.
std::vector<std::string> attribute_names() {
  namespace layout = h5dcp::detail::layout;
  auto names = h5dcp_fuzz::checkpoint_attribute_names();
  names.insert(names.end(), {layout::kLocalRunId, layout::kLocalStep, layout::kLocalOwnerRank, layout::kLocalReplica,
                             layout::kLocalNodes, layout::kLocalRankNode, layout::kLocalChunkOwners});
  return names;
}

constexpr std::int64_t kStep = 3;
std::string g_dir;       // a private directory on tmpfs
std::string g_step_dir;  // the local step's directory (the copy's, and the input's)
std::string g_copy;      // the copy's path in it
h5dcp_fuzz::Pristine g_pristine;

// The state dict saved; called again (zeroed tensors) as the target of the load.
h5dcp::StateDict make_state(bool zero) {
  const auto values = [zero](at::Tensor t) { return zero ? at::zeros_like(t) : t; };
  const auto rows = values(at::arange(24, at::kFloat).reshape({6, 4}));
  h5dcp::StateDict model{
      // Rows [0:2] and [2:6]: two chunks, each with an owner.
      {"weight", h5dcp::ShardedTensor({6, 4}, {h5dcp::Shard{rows.slice(0, 0, 2).clone(), {0, 0}},
                                               h5dcp::Shard{rows.slice(0, 2, 6).clone(), {2, 0}}})},
      {"bias", values(at::arange(4, at::kBFloat16))},
      {"ids", values(at::arange(3, at::kLong))},
      {"scalar", values(at::scalar_tensor(2.5, at::kDouble))},
  };
  return h5dcp::StateDict{{"model", std::move(model)}, {"step", kStep}, {"name", "adam"}};
}

h5dcp::LocalTierOptions tier_options() {
  h5dcp::LocalTierOptions options;
  options.directory = g_dir + "/local";
  options.replicas = 0;  // one node
  options.run_id = "fuzz-run";
  return options;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_dir = h5dcp_fuzz::private_directory("local-copy");
  h5dcp_fuzz::make_opening_files_cheap(g_dir);
  h5dcp_fuzz::start_mpi();
  at::set_num_threads(1);
  {
    h5dcp::CheckpointManager manager(g_dir + "/shared", {}, MPI_COMM_SELF, h5dcp::ManagerOptions{0, tier_options()});
    manager.save(kStep, make_state(false));
  }
  // The manager's step directory; the fuzzer's inputs replace the copy in
  // it, and the manager is not used again.
  g_step_dir = tier_options().directory + "/" + h5dcp::detail::local_step_name(kStep);
  g_copy = g_step_dir + "/" + h5dcp::detail::local_copy_name(0);
  if (access(g_copy.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "fuzz_local_copy: the manager wrote no copy at %s\n", g_copy.c_str());
    std::abort();
  }
  g_pristine = h5dcp_fuzz::read_pristine(g_copy, attribute_names());
  h5dcp_fuzz::print_objects(g_pristine);
  std::atexit([] {
    // The manager's files: a private tmpfs directory, removed whole.
    std::error_code ignored;
    std::filesystem::remove_all(g_dir, ignored);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  h5dcp_fuzz::write_mutated(g_pristine, g_copy, data, size);
  h5dcp_fuzz::expect_no_crash("read_local_copy_summary", [&] { (void)h5dcp::read_local_copy_summary(g_copy); });
  h5dcp_fuzz::read_as_any_checkpoint(g_copy);
  // The recovery's steps run under the manager's CheckpointSession, which
  // holds the HDF5 gate with HDF5's error printing off: so do they here.
  const h5dcp::detail::Hdf5Access access;
  // The survey answers with a report, whatever the copy holds: an exception
  // of any type out of it would fail the recovery instead of skipping the copy.
  const auto report = h5dcp::detail::survey_local_copies("fuzz-node", {{kStep, g_step_dir}});
  if (h5dcp_fuzz::verbose())
    for (const auto& step : report.steps)
      for (const auto& copy : step.copies)
        std::fprintf(stderr, "  survey: step %lld, owner %d: %s\n", static_cast<long long>(step.step), copy.owner_rank,
                     copy.intact ? "intact" : copy.problem.c_str());
  // Both of the recovery's reads: the copy served over MPI (on another
  // node) and read in place (on the loading rank's own node).
  for (const bool here : {false, true})
    h5dcp_fuzz::expect_no_crash("load_from_local_copies", [&] {
      auto state = make_state(true);
      h5dcp::LoadOptions options;
      options.strict = false;
      const auto comm = h5dcp::detail::Comm::single_process();
      (void)h5dcp::detail::load_from_local_copies(comm, state, options, {kStep, {0}, {g_copy}, {here}});
    });
  return 0;
}
