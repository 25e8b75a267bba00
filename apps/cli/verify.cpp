// h5dcp verify FILE: every check h5dcp::verify_checkpoint runs (metadata,
// structure, tiling, data, checksums, values), with a report; exit 1 on any
// problem.

#include <iostream>

#include "common.hpp"
#include "h5dcp/verify.hpp"

namespace h5dcp::cli {

Command add_verify(CLI::App& parent) {
  auto* app = parent.add_subcommand(
      "verify",
      "Check a checkpoint: metadata, list structure, chunk tiling, every tensor byte against its checksum, values.");
  auto file = std::make_shared<std::string>();
  app->add_option("FILE", *file, "the checkpoint")->required();
  app->footer(kExitCodeHelp);
  Command command;
  command.app = app;
  command.run = [file](const Context& context) {
    ProgressLine progress(context.progress, "verify");
    VerifyOptions options;
    options.progress = progress.callback();
    const auto report = verify_checkpoint(*file, options);
    progress.finish();
    if (report.local_copy) std::cout << *file << ": " << local_copy_text(*report.local_copy) << "\n";
    std::string checks;
    for (const auto& c : report.checks) checks += (checks.empty() ? "" : ", ") + c;
    if (report.ok()) {
      std::cout << *file << ": OK: " << report.tensors << " tensors (" << human_bytes(report.bytes_read) << " read), "
                << report.values << " values, " << report.containers << " containers; checked " << checks << "\n";
      return kOk;
    }
    std::cout << *file << ": " << report.problems.size() << (report.problems.size() == 1 ? " problem" : " problems")
              << " found (checked " << checks << "):\n";
    for (const auto& p : report.problems)
      std::cout << "  [" << p.check << "] " << (p.where.empty() ? std::string() : p.where + ": ")
                << without_prefix(p.message) << "\n";
    return kFound;
  };
  return command;
}

}  // namespace h5dcp::cli
