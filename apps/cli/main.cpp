// h5dcp: inspect, verify, compare and convert checkpoints from the shell.
//
// One process normally. Started by mpiexec or srun, it initializes MPI:
// `convert` to a checkpoint then splits the write across the ranks; the
// other subcommands run on rank 0 while the others wait, and every rank
// exits with rank 0's code.

#include <c10/util/Exception.h>
#include <malloc.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <iostream>

#include "common.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/mpi_io.hpp"
#include "h5dcp/version.hpp"

namespace {

using namespace h5dcp::cli;

// Launchers that start ranks (OpenMPI, MPICH/PMI, PMIx, Slurm with PMI).
bool launched_by_mpi() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "MPI_LOCALNRANKS"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

int run_guarded(const Command& command, const Context& context) {
  try {
    return command.run(context);
  } catch (const CLI::Error& e) {
    if (context.rank == 0) print_error(command.app->get_name(), e.what());
    return kUsage;
  } catch (const c10::Error& e) {
    // LibTorch's own (one the library did not wrap): its what() carries a
    // C++ backtrace, which is noise to the user of a command.
    if (context.rank == 0) print_error(command.app->get_name(), e.what_without_backtrace());
    return kFailure;
  } catch (const std::exception& e) {
    // Library errors: an input that cannot be read, a format it does not
    // support, an output that cannot be written.
    if (context.rank == 0) print_error(command.app->get_name(), e.what());
    return kFailure;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Conversions allocate one tensor-sized buffer after another: served by
  // mmap and unmapped when freed, they never pile up in the heap (glibc's
  // adaptive threshold would move them there and keep them).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  CLI::App app{"Inspect, verify, compare and convert h5dcp checkpoints and torch.save files.", "h5dcp"};
  app.set_version_flag("--version", std::string("h5dcp ") + h5dcp::kLibraryVersion);
  app.require_subcommand(1);
  app.footer(kExitCodeHelp);
  bool quiet = false;
  app.add_flag("-q,--quiet", quiet, "no progress line, even on a terminal");
  app.fallthrough();  // so `h5dcp convert -q ...` works too
  const Command commands[] = {add_inspect(app), add_verify(app), add_diff(app), add_convert(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kOk : kUsage;
  }
  const Command* chosen = nullptr;
  for (const auto& c : commands)
    if (c.app->parsed()) chosen = &c;
  if (chosen == nullptr) return kUsage;

  Context context;
  if (launched_by_mpi()) {
    h5dcp::prefer_romio_io_component();
    MPI_Init(&argc, &argv);
    context.mpi = true;
    MPI_Comm_rank(MPI_COMM_WORLD, &context.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &context.size);
  }
  context.progress = !quiet && context.rank == 0 && ::isatty(STDERR_FILENO) == 1;

  int code = kOk;
  if (!context.mpi || context.size == 1 || chosen->collective) {
    code = run_guarded(*chosen, context);
  } else if (context.rank == 0) {
    Context alone = context;
    alone.size = 1;  // the others only wait
    code = run_guarded(*chosen, alone);
  }
  if (context.mpi) {
    int worst = code;
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    code = worst;
  }
  return code;
}
