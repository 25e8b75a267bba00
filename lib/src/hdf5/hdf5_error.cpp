#include "hdf5/hdf5_error.hpp"

#include "h5dcp/error.hpp"
#include "hdf5/handle.hpp"

namespace h5dcp::detail {
namespace {

constexpr unsigned kMaxStackLines = 8;

herr_t append_entry(unsigned n, const H5E_error2_t* entry, void* data) {
  auto* out = static_cast<std::string*>(data);
  if (n >= kMaxStackLines) return 0;
  char minor[160] = "";
  H5Eget_msg(entry->min_num, nullptr, minor, sizeof minor);
  *out += "\n    HDF5 ";
  *out += entry->func_name ? entry->func_name : "?";
  *out += ": ";
  *out += entry->desc ? entry->desc : "";
  if (minor[0] != '\0') *out += std::string(" (") + minor + ")";
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
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, append_entry, &message);
  H5Eclear2(H5E_DEFAULT);
  throw IoError(message);
}

void Handle::close(const std::string& what) {
  if (id_ < 0) return;
  const hid_t id = id_;
  id_ = H5I_INVALID_HID;
  check_status(closer_(id), "closing " + what);
}

}  // namespace h5dcp::detail
