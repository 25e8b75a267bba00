#pragma once
// The text of an exception for an h5dcp message. LibTorch's c10::Error puts
// a C++ backtrace into what() ("Exception raised from ... frame #0: ..."),
// dozens of lines that mean nothing to a user of the CLI or of a collective
// error. The layers below torch/ must not see LibTorch, so the torch layer
// installs a describer (torch/torch_exception_text.cpp) that gives
// c10::Error's what_without_backtrace(); without one, what() is used.

#include <exception>
#include <string>

namespace h5dcp::detail {

/// The installed describer's text for `e`, or e.what().
std::string exception_text(const std::exception& e);

/// A describer: returns false to leave `e` to the default (what()).
using ExceptionDescriber = bool (*)(const std::exception& e, std::string& text);
/// Installs `describer` for every later exception_text call (process-wide;
/// called during static initialization, before any thread exists).
void set_exception_describer(ExceptionDescriber describer) noexcept;

}  // namespace h5dcp::detail
