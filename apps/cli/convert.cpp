// h5dcp convert SRC DST [--to torch|h5dcp]: torch.save file <-> checkpoint,
// the direction inferred from SRC's content. Under mpiexec -n M, converting
// to a checkpoint splits the read and the write across the M ranks; the
// other directions run on rank 0.

#include <sys/stat.h>

#include <iostream>

#include "common.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/file_kind.hpp"
#include "h5dcp/torch_save.hpp"

namespace h5dcp::cli {
namespace {

struct Args {
  std::string src;
  std::string dst;
  std::string to;  // "", "torch" or "h5dcp"
  bool force = false;
  std::int64_t split_min_bytes = TorchSaveToCheckpointOptions{}.split_min_bytes;
};

bool exists(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat x {};
  struct stat y {};
  return ::stat(a.c_str(), &x) == 0 && ::stat(b.c_str(), &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

std::int64_t tensor_bytes(const Metadata& md, std::int64_t& tensors) {
  std::int64_t bytes = 0;
  for (const auto& [fqn, storage] : md.state_dict_metadata)
    if (const auto* t = std::get_if<TensorStorageMetadata>(&storage)) {
      std::int64_t n = static_cast<std::int64_t>(dtype_size(t->properties.dtype));
      for (const auto s : t->size) n *= s;
      bytes += n;
      ++tensors;
    }
  return bytes;
}

// Runs on every rank; `serial` work is rank 0's alone.
int run_convert(const Args& args, const Context& context) {
  // Every rank looks at SRC itself, and the ranks agree on what they saw
  // before any of them starts collective work: SRC on a node-local disk
  // fails on every rank instead of hanging the ones that see it.
  const auto kind = context.mpi ? detect_file_kind(args.src, MPI_COMM_WORLD) : detect_file_kind(args.src);
  std::string to = args.to;
  if (to.empty()) {
    switch (kind) {
      case FileKind::TorchSave: to = "h5dcp"; break;
      case FileKind::H5dcpCheckpoint:
      case FileKind::Hdf5: to = "torch"; break;
      case FileKind::LegacyTorchSave:
        read_torch_save(args.src);  // throws the FormatError that says how to re-save it
        [[fallthrough]];
      case FileKind::Other:
        throw FormatError("'" + args.src + "' is a " + std::string(describe(kind)) +
                          ": neither a torch.save file nor an h5dcp checkpoint");
    }
  }
  const bool from_torch = kind == FileKind::TorchSave || kind == FileKind::LegacyTorchSave;
  // To torch.save, one process writes the one zip file: the other ranks are
  // done (before checking DST, which rank 0 may have written by then).
  if (to == "torch" && context.rank != 0) return kOk;
  // DST as rank 0 (which publishes it) sees it, decided for every rank.
  same_on_every_rank(context, [&] {
    if (args.dst.empty() || args.dst.back() == '/') throw CLI::ValidationError("DST", "DST must name a file");
    if (same_file(args.src, args.dst)) throw CLI::ValidationError("DST", "DST is SRC");
    if (exists(args.dst) && !args.force)
      throw CLI::ValidationError("DST", "'" + args.dst + "' exists (--force replaces it)");
  });

  ProgressLine progress(context.progress, "convert");
  std::int64_t tensors = 0;
  std::int64_t bytes = 0;
  if (from_torch && to == "h5dcp") {
    TorchSaveToCheckpointOptions options;
    options.split_min_bytes = args.split_min_bytes;
    options.progress = progress.callback();
    const auto result = torch_save_to_checkpoint(args.src, args.dst, options, MPI_COMM_WORLD);
    bytes = tensor_bytes(result.metadata, tensors);
  } else if (!from_torch && to == "h5dcp") {
    // A checkpoint rewritten (e.g. with another rank count: dim-0 shards of every tensor).
    LoadAllOptions load_options;
    load_options.layout = LoadLayout::ShardedDim0;
    const auto state = load_all(args.src, load_options, MPI_COMM_WORLD);
    bytes = tensor_bytes(save(state, args.dst, {}, MPI_COMM_WORLD).metadata, tensors);
  } else {  // to torch.save, on rank 0
    if (from_torch) {
      write_torch_save(read_torch_save(args.src), args.dst);
    } else {
      CheckpointToTorchSaveOptions options;
      options.progress = progress.callback();
      checkpoint_to_torch_save(args.src, args.dst, options);
    }
  }
  progress.finish();
  if (context.rank == 0) {
    std::cout << "converted '" << args.src << "' (" << describe(kind) << ") to '" << args.dst << "' ("
              << (to == "h5dcp" ? "h5dcp checkpoint" : "torch.save file") << ")";
    if (to == "h5dcp")
      std::cout << ": " << tensors << " tensors, " << human_bytes(bytes) << ", written by " << context.size
                << (context.size == 1 ? " rank" : " ranks");
    std::cout << "\n";
  }
  return kOk;
}

}  // namespace

Command add_convert(CLI::App& parent) {
  auto* app = parent.add_subcommand(
      "convert",
      "Convert a torch.save file to an h5dcp checkpoint or back; the direction comes from SRC's content.\n"
      "Under mpiexec -n M, converting to a checkpoint splits the work across the M ranks.");
  auto args = std::make_shared<Args>();
  app->add_option("SRC", args->src, "a torch.save file (zip format) or an h5dcp checkpoint")->required();
  app->add_option("DST", args->dst, "the file to write (atomically: a temporary name, then renamed)")->required();
  app->add_option("--to", args->to,
                  "DST's format, torch (torch.save) or h5dcp; by default the one SRC is not in. --to h5dcp on a "
                  "checkpoint rewrites it, split by the current ranks; --to torch on a torch.save file re-saves it")
      ->check(CLI::IsMember({"torch", "h5dcp"}));
  app->add_flag("-f,--force", args->force, "replace DST when it exists");
  app->add_option("--split-min-bytes", args->split_min_bytes,
                  "to a checkpoint under mpiexec: tensors of at least this many bytes are split along dim 0 across "
                  "the ranks, smaller ones written whole by one rank (default 1 MiB)")
      ->check(CLI::NonNegativeNumber);
  app->footer(kExitCodeHelp);
  Command command;
  command.app = app;
  command.collective = true;
  command.run = [args](const Context& context) { return run_convert(*args, context); };
  return command;
}

}  // namespace h5dcp::cli
