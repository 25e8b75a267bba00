#include "hdf5/hdf5_error.hpp"

#include <hdf5.h>

#include <type_traits>
#include <vector>

#include "h5dcp/error.hpp"
#include "hdf5/handle.hpp"

namespace h5dcp::detail {

// handle.hpp and hdf5_error.hpp name HDF5's types without <hdf5.h>.
static_assert(std::is_same_v<Hid, hid_t> && std::is_same_v<int, herr_t>);
static_assert(std::is_same_v<decltype(&H5Fclose), Handle::Closer>);
static_assert(kInvalidHid == H5I_INVALID_HID);

namespace {

// The outermost entries say what h5dcp asked for, the innermost why it failed
// (errno texts live there): both ends are kept.
constexpr unsigned kOuterLines = 2;
constexpr unsigned kInnerLines = 6;

struct Stack {
  std::vector<std::string> lines;
};

herr_t collect_entry(unsigned, const H5E_error2_t* entry, void* data) {
  auto* stack = static_cast<Stack*>(data);
  char minor[160] = "";
  H5Eget_msg(entry->min_num, nullptr, minor, sizeof minor);
  std::string line = "\n    HDF5 ";
  line += entry->func_name ? entry->func_name : "?";
  line += ": ";
  line += entry->desc ? entry->desc : "";
  if (minor[0] != '\0') line += std::string(" (") + minor + ")";
  stack->lines.push_back(std::move(line));
  return 0;
}

}  // namespace

SilenceHdf5Errors::SilenceHdf5Errors() noexcept {
  H5Eget_auto2(H5E_DEFAULT, &previous_func_, &previous_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

SilenceHdf5Errors::~SilenceHdf5Errors() { H5Eset_auto2(H5E_DEFAULT, previous_func_, previous_data_); }

void throw_hdf5_error(const std::string& what) {
  std::string message = "h5dcp: " + what + " failed";
  Stack stack;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_entry, &stack);
  const auto n = stack.lines.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i < kOuterLines || i + kInnerLines >= n)
      message += stack.lines[i];
    else if (i == kOuterLines)
      message += "\n    ...";
  }
  H5Eclear2(H5E_DEFAULT);
  throw IoError(message);
}

void Handle::close(const std::string& what) {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = kInvalidHid;
  check_status(closer_(id), "closing " + what);
}

}  // namespace h5dcp::detail
