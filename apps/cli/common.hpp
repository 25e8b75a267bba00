#pragma once
// What the subcommands of the h5dcp tool share: exit codes, how they are
// registered and run, MPI context, human-readable formatting, and the
// progress line.

#include <ATen/core/Tensor.h>
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "h5dcp/metadata.hpp"
#include "h5dcp/progress.hpp"
#include "h5dcp/state_dict.hpp"
#include "h5dcp/verify.hpp"

namespace h5dcp::cli {

/// The tool's exit codes (README, `h5dcp --help`).
enum ExitCode : int {
  kOk = 0,       ///< success; verify: no problem; diff: equal
  kFound = 1,    ///< verify: problems found; diff: differences found
  kUsage = 2,    ///< bad arguments
  kFailure = 3,  ///< an input cannot be read or is not a supported format, or the output cannot be written
};

/// The footer of every --help.
extern const char* const kExitCodeHelp;

/// Where the command runs: one process, or one rank of an mpiexec job.
struct Context {
  int rank = 0;
  int size = 1;
  bool mpi = false;       ///< MPI_Init was called (launched by mpiexec/srun)
  bool progress = false;  ///< show progress: stderr is a terminal, rank 0, not --quiet
};

/// A subcommand: its CLI11 app, whether it runs on every rank of an mpiexec
/// job (else on rank 0 alone), and what it does.
struct Command {
  CLI::App* app = nullptr;
  bool collective = false;
  std::function<int(const Context&)> run;
};

Command add_inspect(CLI::App& parent);
Command add_verify(CLI::App& parent);
Command add_diff(CLI::App& parent);
Command add_convert(CLI::App& parent);

/// Runs `check` (a CLI::ValidationError when an argument is refused) on rank
/// 0 alone and gives its verdict to every rank: when it throws there, every
/// rank throws the same ValidationError, so no rank starts collective work
/// that others refused. Collective under mpiexec; just `check()` otherwise.
void same_on_every_rank(const Context& context, const std::function<void()>& check);

/// Prints "h5dcp <command>: error: <message>" to stderr.
void print_error(const std::string& command, const std::string& message);
/// A library message without its leading "h5dcp: ".
std::string_view without_prefix(const std::string& message);

/// "108 B", "4.0 KiB", "1.5 MiB", ...
std::string human_bytes(std::int64_t bytes);
/// One line on what a node-local tier's copy holds (inspect, verify).
std::string local_copy_text(const LocalCopySummary& copy);
/// "[4, 6]"; "[]" for a 0-d shape.
std::string shape_text(const std::vector<std::int64_t>& shape);
/// The shortest text that reads back as the same double ("0.1", "1e-07", "nan", "inf").
std::string float_text(double value);
/// "float32", "bfloat16", ... of a tensor's dtype.
std::string dtype_text(const at::Tensor& tensor);
/// How a saved tensor was sharded: "scalar", "whole", "4 shards along dim 0", "6 blocks".
std::string sharding_text(const TensorStorageMetadata& tensor);
/// A non-tensor value as text: 7, 0.5, "adam", True, None, bytes[3] 0001ff, pickle[120].
std::string value_text(const StateValue& value);
/// The encoding name of a non-tensor value ("int", "str", ...).
std::string value_kind(const StateValue& value);

/// One line on stderr that rewrites itself ("convert: 12/40 tensors, 1.2 GiB
/// of 4.0 GiB"), at most ten times a second; nothing when disabled.
class ProgressLine {
 public:
  ProgressLine(bool enabled, std::string label);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void update(const Progress& progress);
  /// A callback for the library, or an empty one when disabled.
  ProgressCallback callback();
  void finish();

 private:
  bool enabled_;
  bool shown_ = false;
  std::string label_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace h5dcp::cli
