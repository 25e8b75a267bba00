#pragma once
// The text of an exception for an h5dcp message. LibTorch's c10::Error puts
// a C++ backtrace into what() ("Exception raised from ... frame #0: ..."),
// dozens of lines that mean nothing to a user of the CLI or of a collective
// error: its what_without_backtrace() is used instead. Declared here without
// LibTorch headers; defined in core/error.cpp.

#include <exception>
#include <string>

namespace h5dcp::detail {

/// what(), or for a c10::Error what_without_backtrace().
std::string exception_text(const std::exception& e);

}  // namespace h5dcp::detail
