#include "h5dcp/error.hpp"

#include <sstream>

namespace h5dcp {
namespace {

std::string describe(const std::string& step, const std::map<int, RankFailure>& failures) {
  std::ostringstream out;
  out << "h5dcp: step '" << step << "' failed on " << failures.size() << (failures.size() == 1 ? " rank" : " ranks")
      << ":";
  for (const auto& [rank, failure] : failures) {
    out << "\n  [rank " << rank << "] ";
    if (failure.kind != ErrorKind::Other) out << error_kind_name(failure.kind) << " error: ";
    out << failure.message;
  }
  return out.str();
}

std::map<int, RankFailure> of_kind_other(const std::map<int, std::string>& messages) {
  std::map<int, RankFailure> failures;
  for (const auto& [rank, message] : messages) failures.emplace(rank, RankFailure{ErrorKind::Other, message});
  return failures;
}

}  // namespace

const char* error_kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::Usage: return "usage";
    case ErrorKind::Format: return "format";
    case ErrorKind::Io: return "I/O";
    case ErrorKind::Collective: return "collective";
    case ErrorKind::Other: break;
  }
  return "other";
}

ErrorKind error_kind_of(const std::exception& e) noexcept {
  if (dynamic_cast<const UsageError*>(&e) != nullptr) return ErrorKind::Usage;
  if (dynamic_cast<const FormatError*>(&e) != nullptr) return ErrorKind::Format;
  if (dynamic_cast<const IoError*>(&e) != nullptr) return ErrorKind::Io;
  if (dynamic_cast<const CheckpointError*>(&e) != nullptr) return ErrorKind::Collective;
  return ErrorKind::Other;
}

CheckpointError::CheckpointError(std::string step, std::map<int, RankFailure> failures)
    : Error(describe(step, failures)), step_(std::move(step)), failures_(std::move(failures)) {
  for (const auto& [rank, failure] : failures_) messages_.emplace(rank, failure.message);
}

CheckpointError::CheckpointError(std::string step, const std::map<int, std::string>& messages)
    : CheckpointError(std::move(step), of_kind_other(messages)) {}

ErrorKind CheckpointError::kind_of(int rank) const noexcept {
  const auto it = failures_.find(rank);
  return it == failures_.end() ? ErrorKind::Other : it->second.kind;
}

}  // namespace h5dcp
