// h5dcp convert SRC DST [--to torch|h5dcp|safetensors|dcp]: a torch.save
// file, safetensors or a PyTorch DCP directory <-> checkpoint, the direction
// inferred from SRC's content (and DST's name: *.safetensors, or
// --max-shard-size, exports safetensors; a directory, a name ending in '/'
// or without an extension, a DCP checkpoint). Under mpiexec -n M,
// converting to a checkpoint and exporting safetensors or DCP split the
// reads and the writes across the M ranks; writing a torch.save file runs
// on rank 0.

#include <sys/stat.h>

#include <cctype>
#include <iostream>
#include <map>
#include <string_view>
#include <vector>

#include "common.hpp"
#include "h5dcp/checkpoint.hpp"
#include "h5dcp/dcp.hpp"
#include "h5dcp/error.hpp"
#include "h5dcp/file_kind.hpp"
#include "h5dcp/safetensors.hpp"
#include "h5dcp/torch_save.hpp"

namespace h5dcp::cli {
namespace {

struct Args {
  std::string src;
  std::string dst;
  std::string to;  // "", "torch", "h5dcp", "safetensors" or "dcp"
  bool force = false;
  std::int64_t split_min_bytes = TorchSaveToCheckpointOptions{}.split_min_bytes;
  std::string prefix;             // safetensors export: only the tensors under it, named relative to it
  std::vector<std::string> keys;  // safetensors export: only these tensors or dicts
  std::string max_shard_size;     // safetensors export: a directory of shards of at most this size
};

bool is_directory(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// "5GB", "500MB", "2GiB", "1000": decimal units as Hugging Face's
// max_shard_size, binary ones with "i".
std::int64_t parse_size(const std::string& text) {
  std::size_t end = 0;
  double number = 0;
  try {
    number = std::stod(text, &end);
  } catch (const std::exception&) {
    throw CLI::ValidationError("--max-shard-size", "'" + text + "' is not a size (e.g. 5GB, 500MB, 2GiB)");
  }
  std::string unit = text.substr(end);
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const std::map<std::string, double> units{
      {"", 1},      {"B", 1},       {"KB", 1e3},       {"MB", 1e6},          {"GB", 1e9},
      {"TB", 1e12}, {"KIB", 1024.}, {"MIB", 1048576.}, {"GIB", 1073741824.}, {"TIB", 1099511627776.}};
  const auto it = units.find(unit);
  if (it == units.end() || !(number > 0) || number * it->second > 9e18)
    throw CLI::ValidationError("--max-shard-size", "'" + text + "' is not a size (e.g. 5GB, 500MB, 2GiB)");
  return static_cast<std::int64_t>(number * it->second);
}

// A DCP checkpoint is a directory: DST names one when it is one, ends in
// '/', or has no extension ("step_1000", not "model.pt").
bool names_directory(const std::string& dst) {
  if (dst.empty()) return false;
  if (dst.back() == '/' || is_directory(dst)) return true;
  const auto slash = dst.rfind('/');
  return dst.find('.', slash == std::string::npos ? 0 : slash + 1) == std::string::npos;
}

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
  // A directory with a .metadata is a DCP checkpoint; another directory or
  // an index (*.json) a sharded safetensors model.
  const bool from_dcp = is_directory(args.src) && exists(args.src + "/.metadata");
  const bool safetensors_set = !from_dcp && (is_directory(args.src) || ends_with(args.src, ".json"));
  const auto kind = from_dcp || safetensors_set ? FileKind::Safetensors
                    : context.mpi               ? detect_file_kind(args.src, MPI_COMM_WORLD)
                                                : detect_file_kind(args.src);
  const bool exports_safetensors = !args.max_shard_size.empty() || ends_with(args.dst, ".safetensors");
  std::string to = args.to;
  if (to.empty()) {
    switch (kind) {
      case FileKind::TorchSave:
      case FileKind::Safetensors: to = "h5dcp"; break;
      case FileKind::H5dcpCheckpoint:
      case FileKind::Hdf5:
        to = exports_safetensors ? "safetensors" : names_directory(args.dst) ? "dcp" : "torch";
        break;
      case FileKind::LegacyTorchSave:
        read_torch_save(args.src);  // throws the FormatError that says how to re-save it
        [[fallthrough]];
      case FileKind::Other:
        throw FormatError("'" + args.src + "' is a " + std::string(describe(kind)) +
                          ": neither a torch.save file nor an h5dcp checkpoint");
    }
  }
  const bool from_torch = kind == FileKind::TorchSave || kind == FileKind::LegacyTorchSave;
  const bool from_safetensors = kind == FileKind::Safetensors && !from_dcp;
  if ((from_torch || from_safetensors || from_dcp) && (to == "safetensors" || to == "dcp"))
    throw CLI::ValidationError("--to", to + " is exported from an h5dcp checkpoint: convert SRC to one first");
  if ((from_safetensors || from_dcp) && to == "torch")
    throw CLI::ValidationError("--to",
                               "a torch.save file is written from an h5dcp checkpoint: convert SRC to one first");
  if (to != "safetensors" && (!args.prefix.empty() || !args.keys.empty() || !args.max_shard_size.empty()))
    throw CLI::ValidationError("--prefix/--key/--max-shard-size", "only apply to a safetensors export");
  // To torch.save, one process writes the one zip file: the other ranks are
  // done (before checking DST, which rank 0 may have written by then).
  if (to == "torch" && context.rank != 0) return kOk;
  // DST as rank 0 (which publishes it) sees it, decided for every rank.
  same_on_every_rank(context, [&] {
    if (args.dst.empty() || (args.dst.back() == '/' && args.max_shard_size.empty() && to != "dcp"))
      throw CLI::ValidationError("DST", "DST must name a file");
    if (same_file(args.src, args.dst)) throw CLI::ValidationError("DST", "DST is SRC");
    if (exists(args.dst) && !args.force)
      throw CLI::ValidationError("DST", "'" + args.dst + "' exists (--force replaces it)");
  });

  ProgressLine progress(context.progress, "convert");
  std::int64_t tensors = 0;
  std::int64_t bytes = 0;
  SafetensorsExport exported;
  if (to == "dcp") {
    CheckpointToDcpOptions options;
    options.split_min_bytes = args.split_min_bytes;
    options.progress = progress.callback();
    const auto result = checkpoint_to_dcp(args.src, args.dst, options, MPI_COMM_WORLD);
    tensors = result.tensors;
    bytes = result.bytes;
  } else if (to == "safetensors") {
    CheckpointToSafetensorsOptions options;
    options.prefix = args.prefix;
    options.keys = args.keys;
    options.max_shard_size = args.max_shard_size.empty() ? 0 : parse_size(args.max_shard_size);
    options.split_min_bytes = args.split_min_bytes;
    options.progress = progress.callback();
    exported = checkpoint_to_safetensors(args.src, args.dst, options, MPI_COMM_WORLD);
    tensors = exported.tensors;
    bytes = exported.bytes;
  } else if (from_dcp || from_safetensors || (from_torch && to == "h5dcp")) {
    // Every source with an index converts through the same path, with the same options.
    TorchSaveToCheckpointOptions options;
    options.split_min_bytes = args.split_min_bytes;
    options.progress = progress.callback();
    const auto convert = from_dcp           ? dcp_to_checkpoint
                         : from_safetensors ? safetensors_to_checkpoint
                                            : torch_save_to_checkpoint;
    bytes = tensor_bytes(convert(args.src, args.dst, options, MPI_COMM_WORLD).metadata, tensors);
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
    std::cout << "converted '" << args.src << "' (" << (from_dcp ? "PyTorch DCP checkpoint" : describe(kind))
              << ") to '" << args.dst << "' ("
              << (to == "h5dcp"   ? "h5dcp checkpoint"
                  : to == "torch" ? "torch.save file"
                  : to == "dcp"   ? "PyTorch DCP checkpoint"
                                  : "safetensors")
              << ")";
    if (to != "torch")
      std::cout << ": " << tensors << " tensors, " << human_bytes(bytes) << ", written by " << context.size
                << (context.size == 1 ? " rank" : " ranks");
    std::cout << "\n";
    if (exported.files.size() > 1)
      std::cout << "  " << exported.files.size() - 1 << " shards and " << exported.files.back() << "\n";
    if (!exported.skipped_values.empty())
      std::cout << "  " << exported.skipped_values.size()
                << " non-tensor values left out (safetensors holds tensors only), e.g. '"
                << exported.skipped_values.front() << "'\n";
  }
  return kOk;
}

}  // namespace

Command add_convert(CLI::App& parent) {
  auto* app = parent.add_subcommand(
      "convert",
      "Convert a torch.save file, safetensors or a PyTorch DCP checkpoint directory to an h5dcp checkpoint, or a\n"
      "checkpoint to a torch.save file, safetensors or a DCP directory; the direction comes from SRC's content (and\n"
      "DST's name: *.safetensors exports safetensors; a directory, a name ending in '/' or without an extension,\n"
      "a DCP checkpoint). Under mpiexec -n M, converting to a checkpoint and exporting safetensors or DCP split\n"
      "the work across the M ranks.");
  auto args = std::make_shared<Args>();
  app->add_option("SRC", args->src,
                  "a torch.save file (zip format), an h5dcp checkpoint, a .safetensors file, a "
                  "model.safetensors.index.json, a directory holding one of those, or a PyTorch DCP checkpoint "
                  "directory (with its .metadata)")
      ->required();
  app->add_option("DST", args->dst, "the file or directory to write (atomically: a temporary name, then renamed)")
      ->required();
  app->add_option("--to", args->to,
                  "DST's format, torch (torch.save), h5dcp, safetensors or dcp (a PyTorch DCP directory); by "
                  "default h5dcp from torch.save, safetensors and DCP, and from a checkpoint safetensors when DST "
                  "ends in .safetensors or --max-shard-size is given, dcp when DST is a directory, ends in '/' or "
                  "has no extension, else torch. --to h5dcp on a checkpoint rewrites it, split by the current "
                  "ranks; --to torch on a torch.save file re-saves it")
      ->check(CLI::IsMember({"torch", "h5dcp", "safetensors", "dcp"}));
  app->add_option("--prefix", args->prefix,
                  "safetensors export: only the tensors under this fqn (e.g. model/), named relative to it");
  app->add_option("--key", args->keys,
                  "safetensors export: only this tensor, or the tensors under this dict (an fqn; repeatable)");
  app->add_option("--max-shard-size", args->max_shard_size,
                  "safetensors export: DST is a directory of model-0000k-of-0000n.safetensors shards of at most "
                  "this size (5GB, 500MB, 2GiB) and model.safetensors.index.json");
  app->add_flag("-f,--force", args->force, "replace DST when it exists");
  app->add_option("--split-min-bytes", args->split_min_bytes,
                  "to a checkpoint, safetensors or DCP under mpiexec: tensors of at least this many bytes are split "
                  "along dim 0 across "
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
