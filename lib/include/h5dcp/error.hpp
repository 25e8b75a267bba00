#pragma once
// The h5dcp exception hierarchy. Every exception h5dcp throws derives from
// h5dcp::Error (a std::runtime_error), so `catch (const h5dcp::Error&)` is
// enough for callers that only report.

#include <exception>
#include <map>
#include <stdexcept>
#include <string>

namespace h5dcp {

/// Base of every h5dcp exception.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The caller passed something h5dcp cannot use: a shard outside its global
/// shape, an unsupported dtype, a missing key, a shape or dtype mismatch.
class UsageError : public Error {
 public:
  using Error::Error;
};

/// A file is not a (readable) h5dcp checkpoint: not HDF5, damaged metadata,
/// a newer major format version, a missing dataset.
class FormatError : public Error {
 public:
  using Error::Error;
};

/// An I/O failure below h5dcp: HDF5 (with its error stack in the message),
/// MPI, or the file system.
class IoError : public Error {
 public:
  using Error::Error;
};

/// What kind of error a rank threw: the h5dcp exception it was (a
/// CheckpointError of an inner step counts as Collective), or Other for
/// anything else (a LibTorch error, a std::exception of the caller's code).
enum class ErrorKind { Usage, Format, Io, Collective, Other };

/// "usage", "format", "I/O", "collective", "other".
const char* error_kind_name(ErrorKind kind) noexcept;

/// The kind of `e` (by its dynamic type).
ErrorKind error_kind_of(const std::exception& e) noexcept;

/// What one rank threw in a collective step.
struct RankFailure {
  ErrorKind kind = ErrorKind::Other;
  std::string message;  ///< its what() (for LibTorch errors without the C++ backtrace)
};

/// A collective step failed on one or more ranks. Every rank of the
/// communicator throws the same CheckpointError: it names the step (phase)
/// and carries, for each failing rank, the kind and the message of what it
/// threw (an IoError's message holds HDF5's error stack). what() is
///   h5dcp: step 'save:write' failed on 2 ranks:
///     [rank 1] I/O error: h5dcp: ...
///     [rank 3] usage error: h5dcp: ...
/// (no kind is printed for Other).
class CheckpointError : public Error {
 public:
  /// `failures` maps each failing rank to what it threw.
  CheckpointError(std::string step, std::map<int, RankFailure> failures);
  /// Failures of kind Other, from messages alone.
  CheckpointError(std::string step, const std::map<int, std::string>& messages);

  /// The collective step that failed, e.g. "save:plan" or "load:read".
  const std::string& step() const noexcept { return step_; }
  /// Rank -> message of every rank that failed in that step.
  const std::map<int, std::string>& failures() const noexcept { return messages_; }
  /// Rank -> kind and message of every rank that failed in that step.
  const std::map<int, RankFailure>& rank_failures() const noexcept { return failures_; }
  /// The kind of error `rank` threw; Other for a rank that did not fail.
  ErrorKind kind_of(int rank) const noexcept;

 private:
  std::string step_;
  std::map<int, RankFailure> failures_;
  std::map<int, std::string> messages_;
};

}  // namespace h5dcp
