#pragma once
// The h5dcp exception hierarchy. Every exception h5dcp throws derives from
// h5dcp::Error (a std::runtime_error), so `catch (const h5dcp::Error&)` is
// enough for callers that only report.

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

/// A collective step failed on one or more ranks. Every rank of the
/// communicator throws the same CheckpointError: it names the step (phase)
/// and carries each failing rank's message.
class CheckpointError : public Error {
 public:
  /// `failures` maps a failing rank to the message of what it threw.
  CheckpointError(std::string step, std::map<int, std::string> failures);

  /// The collective step that failed, e.g. "save:plan" or "load:read".
  const std::string& step() const noexcept { return step_; }
  /// Rank -> message of every rank that failed in that step.
  const std::map<int, std::string>& failures() const noexcept { return failures_; }

 private:
  std::string step_;
  std::map<int, std::string> failures_;
};

}  // namespace h5dcp
